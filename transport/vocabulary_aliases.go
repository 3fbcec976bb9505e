package transport

import "github.com/replog-io/replog/protocol"

// The protocol's messages moved to package protocol; the aliases below keep
// transport.Message and friends compiling.
//
// temporary: removed once replica, fetcher and simulation import protocol.
// Nothing else may use them (transport itself names protocol's types).

// Deprecated: use protocol.Message.
type Message = protocol.Message

// Deprecated: use protocol.Body.
type Body = protocol.Body

// Deprecated: use protocol.Kind.
type Kind = protocol.Kind

// Deprecated: use protocol.FetchRequest.
type FetchRequest = protocol.FetchRequest

// Deprecated: use protocol.FetchResponse.
type FetchResponse = protocol.FetchResponse

// Deprecated: use protocol.FetchError.
type FetchError = protocol.FetchError

// Deprecated: use protocol.VoteRequest.
type VoteRequest = protocol.VoteRequest

// Deprecated: use protocol.VoteResponse.
type VoteResponse = protocol.VoteResponse

// Deprecated: use protocol.BeginEpoch.
type BeginEpoch = protocol.BeginEpoch

// Deprecated: use protocol.AppendRequest.
type AppendRequest = protocol.AppendRequest

// Deprecated: use protocol.AppendResponse.
type AppendResponse = protocol.AppendResponse

// Deprecated: use protocol.AppendError.
type AppendError = protocol.AppendError

// Deprecated: use the constants of the same names in package protocol.
const (
	KindFetchRequest   = protocol.KindFetchRequest
	KindFetchResponse  = protocol.KindFetchResponse
	KindVoteRequest    = protocol.KindVoteRequest
	KindVoteResponse   = protocol.KindVoteResponse
	KindBeginEpoch     = protocol.KindBeginEpoch
	KindAppendRequest  = protocol.KindAppendRequest
	KindAppendResponse = protocol.KindAppendResponse

	FetchOK               = protocol.FetchOK
	FetchFencedEpoch      = protocol.FetchFencedEpoch
	FetchDivergingEpoch   = protocol.FetchDivergingEpoch
	FetchOffsetOutOfRange = protocol.FetchOffsetOutOfRange
	FetchNotLeader        = protocol.FetchNotLeader

	AppendOK        = protocol.AppendOK
	AppendNotLeader = protocol.AppendNotLeader
	AppendUnknown   = protocol.AppendUnknown
	AppendTooLarge  = protocol.AppendTooLarge
)
