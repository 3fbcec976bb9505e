package protocol

import "fmt"

// Message is one protocol message between two nodes. Body is one of the
// pointer types below (*FetchRequest, *FetchResponse, *VoteRequest,
// *VoteResponse, *BeginEpoch, *AppendRequest, *AppendResponse,
// *DeleteRecords, *EndEpoch, *SnapshotRequest, *SnapshotResponse,
// *Heartbeat).
type Message struct {
	From string
	To   string
	// Log is the named log the message belongs to: "" for the node's
	// default log (every message of a node without named logs), else a
	// name ValidLogName accepts. Every body kind carries it, from
	// LogNameVersion on; below it a message with a Log cannot be encoded
	// (ErrLogNameVersion), so it is never read as the default log's.
	Log  string
	Body Body
}

// String formats the message for logs and traces; a named log's message
// names it in brackets after the addresses.
func (m Message) String() string {
	if m.Log != "" {
		return fmt.Sprintf("%s->%s [%s] %s", m.From, m.To, m.Log, m.Body)
	}
	return fmt.Sprintf("%s->%s %s", m.From, m.To, m.Body)
}

// Body is implemented by every message body type. The unexported method
// closes the set: the codec knows every type.
type Body interface {
	fmt.Stringer
	Kind() Kind
	isBody()
}

// Kind identifies a body type on the wire. Values are part of the wire
// format: never renumber.
type Kind uint8

// Body kinds.
const (
	KindFetchRequest   Kind = 1
	KindFetchResponse  Kind = 2
	KindVoteRequest    Kind = 3
	KindVoteResponse   Kind = 4
	KindBeginEpoch     Kind = 5
	KindAppendRequest  Kind = 6
	KindAppendResponse Kind = 7
	KindDeleteRecords  Kind = 8
	KindEndEpoch       Kind = 9
)

// FetchRequest is sent by a follower (voter or observer) to the leader it
// knows. FetchOffset is the follower's LEO; LastFetchedEpoch is the epoch of
// the follower's entry at FetchOffset-1 (0 if it has none).
type FetchRequest struct {
	// FetchID ties the response to this request; followers drop responses
	// whose FetchID is not their outstanding one.
	FetchID   uint64
	ReplicaID string
	// ReplicaDirID is the directory ID of the fetching replica's store:
	// the leader counts the fetch toward the HW and check-quorum only if
	// (ReplicaID, ReplicaDirID) is a voter of the set in force (R55).
	ReplicaDirID     string
	CurrentEpoch     uint64
	FetchOffset      uint64
	LastFetchedEpoch uint64
	MaxBytes         uint32
	// MaxWaitMs is how long the leader may park a fetch that finds nothing.
	MaxWaitMs uint32
	// Restand: the fetcher is a voter whose failed candidacy left it in
	// CurrentEpoch, and a voter in contact with the receiver named the
	// receiver its leader of an earlier epoch. The receiver, fenced by it,
	// stands again at once if its log is at least as up to date (R20).
	Restand bool
	// FeatureLevel is the highest cluster feature level the fetcher
	// supports (R68); 0 means BaseFeatureLevel, as from a node that does
	// not send it. Encoded from FeatureLevelVersion on only.
	FeatureLevel uint8
	// HasDurableOffset says that DurableOffset is the end of the
	// fetcher's durable log (≤ FetchOffset; the entries between them are
	// being written). The leader counts min(FetchOffset, DurableOffset)
	// as the fetcher's LEO (R70); without it, FetchOffset, which the
	// fetcher then must hold durably (as every fetch decoded below
	// DurableOffsetVersion does). Encoded from DurableOffsetVersion on
	// only.
	HasDurableOffset bool
	DurableOffset    uint64
	// Quiescent: the fetcher is caught up (its previous fetch was
	// answered with no entries and an HW equal to its offset) and asks
	// to be parked without a deadline, its liveness proven by the
	// node's contact instead (R99). Encoded from QuiescenceVersion on
	// only; sent only at FeatureLevelQuiescence.
	Quiescent bool
}

// FetchError is the outcome carried by a FetchResponse.
type FetchError uint8

// Fetch outcomes. Values are part of the wire format.
const (
	FetchOK FetchError = 0
	// FetchFencedEpoch: the request's CurrentEpoch is below the leader's.
	// LeaderID and Epoch name the current leader.
	FetchFencedEpoch FetchError = 1
	// FetchDivergingEpoch: the follower's log diverges; truncate to
	// min(DivergingEndOffset, own EndOffsetForEpoch(DivergingEpoch).end).
	FetchDivergingEpoch FetchError = 2
	// FetchOffsetOutOfRange: FetchOffset is below LogStartOffset.
	FetchOffsetOutOfRange FetchError = 3
	// FetchNotLeader: the receiver is not the leader of CurrentEpoch;
	// LeaderID (if known) and Epoch are its view.
	FetchNotLeader FetchError = 4
)

// String names the outcome.
func (e FetchError) String() string {
	switch e {
	case FetchOK:
		return "ok"
	case FetchFencedEpoch:
		return "fenced-epoch"
	case FetchDivergingEpoch:
		return "diverging-epoch"
	case FetchOffsetOutOfRange:
		return "offset-out-of-range"
	case FetchNotLeader:
		return "not-leader"
	}
	return fmt.Sprintf("fetch-error(%d)", uint8(e))
}

// FetchResponse answers a FetchRequest.
type FetchResponse struct {
	FetchID  uint64
	LeaderID string
	Epoch    uint64
	Error    FetchError
	// DivergingEpoch and DivergingEndOffset are set with FetchDivergingEpoch.
	DivergingEpoch     uint64
	DivergingEndOffset uint64
	HighWatermark      uint64
	LogStartOffset     uint64
	// Entries start at the request's FetchOffset (empty if none).
	Entries []Entry
	// LogStartVoters are the leader's voter-set rows below LogStartOffset
	// (KeptVoterRows: the set in force there and the newest change before
	// it), sent with FetchOffsetOutOfRange and with a diverging answer of
	// epoch 0: a follower that resets to the log start holds none of their
	// entries, and records them instead (docs/protocol.md R53, R55).
	LogStartVoters []VotersAt
	// LogStartEpoch, with LogStartVoters, is the epoch of the leader's
	// entry just below LogStartOffset (0 if it does not know it): a
	// follower that resets keeps it as its epoch map's one row, so that
	// its empty log compares in elections as the log it stands for (R21,
	// R53).
	LogStartEpoch uint64
	// Quiescent: this answers a fetch marked Quiescent (R99), so the
	// nodes at both ends count it among their quiescent messages (R100).
	// Encoded from QuiescenceVersion on only.
	Quiescent bool
}

// VoteRequest asks for a vote (or a pre-vote) in Epoch.
type VoteRequest struct {
	Epoch       uint64
	CandidateID string
	LastEpoch   uint64
	LEO         uint64
	PreVote     bool
	// Round identifies the candidate's election round (one per pre-vote or
	// vote round; a new round gets a new value). The answer echoes it, so
	// the candidate counts only answers to the round it is in.
	Round uint64
	// CandidateDirID is the candidate's own directory ID.
	CandidateDirID string
	// VoterDirID is the directory ID the candidate's voter set records for
	// the receiver, "" if the candidate's log holds no voter set yet (a
	// cluster's first election). A receiver whose own directory ID differs
	// refuses (R56): a wiped voter is not its old self.
	VoterDirID string
}

// VoteResponse answers a VoteRequest.
type VoteResponse struct {
	// Epoch is the responder's own epoch.
	Epoch   uint64
	VoterID string
	Granted bool
	// PreVote, RequestEpoch and Round echo the request's PreVote, Epoch and
	// Round: they name the round this answers (a late answer to an older
	// round is dropped, never counted).
	PreVote      bool
	RequestEpoch uint64
	Round        uint64
	// LeaderID is the responder's known leader of Epoch, if any.
	LeaderID string
	// VoterDirID is the responder's own directory ID: the first leader of
	// a cluster records its voters' directories from its grants (R57).
	VoterDirID string
	// Formed reports that the responder belongs to a cluster that exists:
	// its log holds a voter set (or entries), or it has learned that one
	// exists. A fresh store never bootstraps a cluster while anyone it
	// asked answers Formed (R60).
	Formed bool
}

// BeginEpoch is sent by a new leader to every voter.
type BeginEpoch struct {
	Epoch    uint64
	LeaderID string
}

// AppendRequest forwards appends from a follower to the leader.
type AppendRequest struct {
	// RequestID is unique per sender; the response carries it back.
	RequestID uint64
	// Epoch is the epoch in which the sender believes the receiver leads.
	// The receiver appends the records only while it leads exactly that
	// epoch, so a copy delivered after the receiver restarted (it can never
	// lead the same epoch again) is never appended a second time.
	Epoch   uint64
	Records [][]byte
	// Type is what the records become: data entries (EntryData, or the
	// zero value, which means the same), or control entries
	// (EntryControl: a barrier, whose one record is empty; docs/protocol.md
	// R50). A leader appends control records only when they are empty.
	// EntryKeyed and EntryState mark a keyed request (R61): its last record
	// is the encoded KeyHeader (N: the records before it), the others are
	// the batch (EntryState: each one cursor's EncodeStateRecords).
	// On the wire the type follows the records, and only when it is not
	// data: a data request is encoded as it was before the field existed.
	Type EntryType
}

// AppendError is the outcome carried by an AppendResponse.
type AppendError uint8

// Append outcomes. Values are part of the wire format.
const (
	AppendOK AppendError = 0
	// AppendNotLeader: the receiver does not lead the request's Epoch, which
	// is its own current epoch, and never did (or the sender is not a member
	// it takes appends from); LeaderID names the leader it knows, if any.
	// The records were not appended and never will be.
	AppendNotLeader AppendError = 1
	// AppendUnknown: the records may or may not have been appended (the
	// leader lost leadership before they committed, or the request names
	// an epoch other than the receiver's current one, which it may have led
	// in a life it no longer remembers).
	AppendUnknown AppendError = 2
	// AppendTooLarge: a record exceeds the leader's limit (for a control
	// request, whose records must be empty: any record with data);
	// nothing appended.
	AppendTooLarge AppendError = 3
	// AppendVoterChangePending: a voter change was refused because another
	// one is not yet committed, or the leader has not yet committed an
	// entry of its epoch (R58); nothing appended. Retry later.
	AppendVoterChangePending AppendError = 4
	// AppendUnknownNode: a voter change names a node the leader cannot
	// add (it has not fetched from the leader) or remove (not a voter);
	// nothing appended.
	AppendUnknownNode AppendError = 5
	// AppendLastVoter: a voter change would remove the last voter; nothing
	// appended.
	AppendLastVoter AppendError = 6
	// AppendNotCaughtUp: the node to add has not caught up with the
	// leader's log yet; nothing appended. Retry later.
	AppendNotCaughtUp AppendError = 7
	// AppendDuplicate: the request's caller ID was appended within the
	// leader's deduplication window (R64); nothing appended, FirstOffset
	// is the original's (committed).
	AppendDuplicate AppendError = 8
	// AppendLogExists, AppendUnknownLog and AppendFeatureLevelTooLow refuse
	// a log change (R80): a create of a name the catalog holds, a delete
	// of one it does not, or a cluster feature level below
	// FeatureLevelNamedLogs; nothing appended. Only a node that proposes
	// log changes, a release of wire version 9 or later, receives them.
	// AppendFeatureLevelTooLow also refuses an entry-keyed append below
	// FeatureLevelKeys (R102).
	AppendLogExists          AppendError = 9
	AppendUnknownLog         AppendError = 10
	AppendFeatureLevelTooLow AppendError = 11
)

// String names the outcome.
func (e AppendError) String() string {
	switch e {
	case AppendOK:
		return "ok"
	case AppendNotLeader:
		return "not-leader"
	case AppendUnknown:
		return "unknown"
	case AppendTooLarge:
		return "too-large"
	case AppendVoterChangePending:
		return "voter-change-pending"
	case AppendUnknownNode:
		return "unknown-node"
	case AppendLastVoter:
		return "last-voter"
	case AppendNotCaughtUp:
		return "not-caught-up"
	case AppendDuplicate:
		return "duplicate"
	case AppendLogExists:
		return "log-exists"
	case AppendUnknownLog:
		return "unknown-log"
	case AppendFeatureLevelTooLow:
		return "feature-level-too-low"
	}
	return fmt.Sprintf("append-error(%d)", uint8(e))
}

// AppendResponse answers an AppendRequest once its records are committed
// (FirstOffset is the offset of the first record), or with an error.
type AppendResponse struct {
	RequestID   uint64
	Error       AppendError
	LeaderID    string
	FirstOffset uint64
}

// DeleteRecords asks the leader of Epoch to move its log start up to
// Offset (Kafka's DeleteRecords; docs/protocol.md R54). It is one-way: the
// sender learns the outcome from its own log start, which follows the
// leader's through fetch answers (R52). The leader bounds Offset by its HW
// (R51), so a request can never delete anything uncommitted.
type DeleteRecords struct {
	Epoch  uint64
	Offset uint64
}

// EndEpoch is sent by a leader that hands over its leadership (KRaft's
// EndQuorumEpoch with a preferred successor; R59): it no longer leads
// Epoch. Successor, a voter the leader made sure has its whole log, starts
// an election at once; the other voters stop counting the leader as alive.
type EndEpoch struct {
	Epoch     uint64
	LeaderID  string
	Successor string
}

// Kind implements Body.
func (*FetchRequest) Kind() Kind   { return KindFetchRequest }
func (*FetchResponse) Kind() Kind  { return KindFetchResponse }
func (*VoteRequest) Kind() Kind    { return KindVoteRequest }
func (*VoteResponse) Kind() Kind   { return KindVoteResponse }
func (*BeginEpoch) Kind() Kind     { return KindBeginEpoch }
func (*AppendRequest) Kind() Kind  { return KindAppendRequest }
func (*AppendResponse) Kind() Kind { return KindAppendResponse }
func (*DeleteRecords) Kind() Kind  { return KindDeleteRecords }
func (*EndEpoch) Kind() Kind       { return KindEndEpoch }

func (*FetchRequest) isBody()   {}
func (*FetchResponse) isBody()  {}
func (*VoteRequest) isBody()    {}
func (*VoteResponse) isBody()   {}
func (*BeginEpoch) isBody()     {}
func (*AppendRequest) isBody()  {}
func (*AppendResponse) isBody() {}
func (*DeleteRecords) isBody()  {}
func (*EndEpoch) isBody()       {}

func (m *FetchRequest) String() string {
	restand := ""
	if m.Restand {
		restand = " restand"
	}
	if m.Quiescent {
		restand += " quiescent"
	}
	return fmt.Sprintf("Fetch{id=%d replica=%s%s epoch=%d offset=%d lastEpoch=%d%s}",
		m.FetchID, m.ReplicaID, dirSuffix(m.ReplicaDirID), m.CurrentEpoch, m.FetchOffset, m.LastFetchedEpoch, restand)
}

func (m *FetchResponse) String() string {
	s := fmt.Sprintf("FetchResp{id=%d leader=%s epoch=%d %s hw=%d start=%d entries=%d",
		m.FetchID, m.LeaderID, m.Epoch, m.Error, m.HighWatermark, m.LogStartOffset, len(m.Entries))
	if m.Error == FetchDivergingEpoch {
		s += fmt.Sprintf(" diverging=(%d,%d)", m.DivergingEpoch, m.DivergingEndOffset)
	}
	for _, r := range m.LogStartVoters {
		s += fmt.Sprintf(" voters@%d=%d", r.Offset, len(r.Voters))
	}
	if m.LogStartEpoch != 0 {
		s += fmt.Sprintf(" start_epoch=%d", m.LogStartEpoch)
	}
	if m.Quiescent {
		s += " quiescent"
	}
	return s + "}"
}

func (m *VoteRequest) String() string {
	s := fmt.Sprintf("Vote{epoch=%d cand=%s%s last=(%d,%d) pre=%t round=%d",
		m.Epoch, m.CandidateID, dirSuffix(m.CandidateDirID), m.LastEpoch, m.LEO, m.PreVote, m.Round)
	if m.VoterDirID != "" {
		s += " voterDir=" + shortDir(m.VoterDirID)
	}
	return s + "}"
}

func (m *VoteResponse) String() string {
	formed := ""
	if m.Formed {
		formed = " formed"
	}
	return fmt.Sprintf("VoteResp{epoch=%d voter=%s%s granted=%t pre=%t req=(%d,%d) leader=%s%s}",
		m.Epoch, m.VoterID, dirSuffix(m.VoterDirID), m.Granted, m.PreVote, m.RequestEpoch, m.Round, m.LeaderID, formed)
}

func (m *BeginEpoch) String() string {
	return fmt.Sprintf("BeginEpoch{epoch=%d leader=%s}", m.Epoch, m.LeaderID)
}

func (m *AppendRequest) String() string {
	if m.Type != 0 && m.Type != EntryData {
		return fmt.Sprintf("Append{id=%d epoch=%d %s records=%d}", m.RequestID, m.Epoch, m.Type, len(m.Records))
	}
	return fmt.Sprintf("Append{id=%d epoch=%d records=%d}", m.RequestID, m.Epoch, len(m.Records))
}

func (m *AppendResponse) String() string {
	return fmt.Sprintf("AppendResp{id=%d %s leader=%s first=%d}",
		m.RequestID, m.Error, m.LeaderID, m.FirstOffset)
}

func (m *EndEpoch) String() string {
	return fmt.Sprintf("EndEpoch{epoch=%d leader=%s successor=%s}", m.Epoch, m.LeaderID, m.Successor)
}

// dirSuffix is "/" and the abbreviated directory ID, or "" if id is.
func dirSuffix(id string) string {
	if id == "" {
		return ""
	}
	return "/" + shortDir(id)
}

// shortDir abbreviates a directory ID for logs (its first 8 characters).
func shortDir(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (m *DeleteRecords) String() string {
	return fmt.Sprintf("DeleteRecords{epoch=%d before=%d}", m.Epoch, m.Offset)
}

// dataType reports whether the request's records are data (Type EntryData
// or zero).
func (m *AppendRequest) dataType() bool { return m.Type == 0 || m.Type == EntryData }
