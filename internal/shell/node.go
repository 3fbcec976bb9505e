package shell

import (
	"fmt"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// EventKind says what an Event carries.
type EventKind uint8

// The kinds of events a round feeds the core.
const (
	// EventPropose: a batch of records to append (Event.ID, Event.Records).
	EventPropose EventKind = iota + 1
	// EventMessage: a message from a peer (Event.Message).
	EventMessage
	// EventHint: a membership hint (Event.Hint).
	EventHint
	// EventBarrier: a read barrier to append (Event.ID): one control entry
	// without data (replica.ProposeBarrier); it is resolved as a proposal
	// is, with the entry's offset.
	EventBarrier
	// EventDeleteBefore: move the log start up to Event.Offset
	// (replica.RequestDeleteBefore, R51/R54: a leader moves its own,
	// bounded by its HW and durable LEO; a follower or observer asks its
	// leader with a DeleteRecords message and follows the leader's log
	// start, R52; with no leader known the event does nothing, and the
	// caller asks again later).
	EventDeleteBefore
	// EventVoterChange: add or remove a voter (Event.ID, Event.Change;
	// replica.ProposeVoterChange, docs/protocol.md R58). It is resolved as a
	// proposal is, with the offset of the new voter set once that is
	// committed, or with the refusal (replica.ErrVoterChangePending,
	// ErrUnknownNode, ErrLastVoter, ErrNotCaughtUp: nothing changed).
	EventVoterChange
	// EventTransfer: hand the leadership over to Event.To (Event.ID; see
	// Transfer, transfer.go, docs/protocol.md R59).
	EventTransfer
	// EventCursor: record cursor Event.Cursor at position Event.Offset
	// (Event.ID, Event.Key; replica.ProposeCursor, R65), resolved as a
	// proposal is.
	EventCursor
	// EventCursorRead: read cursor Event.Cursor's position as of the
	// readable HW (Event.ID; replica.Cursor, R65). It appends nothing and
	// is resolved in the round it is fed to, with the position as Offset,
	// or ErrNoCursor.
	EventCursorRead
	// EventPeerDown: a connection to or from peer Event.To ended by the
	// peer's doing (end of stream, reset), as the transport saw it
	// (replica.PeerDown, docs/protocol.md R69).
	EventPeerDown
	// EventLogChange: create log Event.Name with spec Event.Spec, or
	// delete it (Spec empty) (Event.ID, Event.Key;
	// replica.ProposeLogChange, docs/protocol.md R80), resolved as a
	// proposal is, or with the refusal (replica.ErrLogExists,
	// ErrUnknownLog, ErrFeatureLevelTooLow, ErrTooLarge: nothing
	// appended).
	EventLogChange
	// EventSnapshotProgress: the shell's word on the snapshot it is
	// receiving or holds (Event.Snapshot; replica.SnapshotProgress, R94):
	// at start, and once it wrote (or installed) each of
	// Output.SnapshotChunks.
	EventSnapshotProgress
	// EventPeerSilent: the node heard nothing from peer Event.To for
	// FetchTimeout (its contact clock, replica.PeerSilent, R99): the
	// event that wakes a quiesced log, which keeps no deadline of its own.
	EventPeerSilent
	// EventResync: a quiescent message between the node and peer
	// Event.To may have been lost (replica.Resync, R100).
	EventResync
)

// Resolves reports whether events of kind k are requests the Node
// resolves, once each, with a Resolved carrying the event's ID: a caller
// waits for them, and answers them itself when a round never runs.
func (k EventKind) Resolves() bool {
	switch k {
	case EventPropose, EventBarrier, EventVoterChange, EventTransfer, EventCursor, EventCursorRead, EventLogChange:
		return true
	}
	return false
}

// Event is one input of a round, other than the clock and persistence.
type Event struct {
	Kind EventKind
	// ID names a proposal; the caller chooses it, unique among the
	// proposals this Node has not resolved yet. Its Resolved carries it.
	ID      uint64
	Records [][]byte
	Message protocol.Message
	Hint    replica.Hint
	// Offset is EventDeleteBefore's offset.
	Offset uint64
	// Change is EventVoterChange's change.
	Change protocol.VoterChange
	// To is EventTransfer's successor ("": any) and the peer of
	// EventPeerDown, EventPeerSilent and EventResync.
	To string
	// Key makes an EventPropose keyed (replica.ProposeKeyed, R61-R64) and
	// is EventCursor's key; Cursor is EventCursor's and EventCursorRead's
	// name.
	Key    protocol.Key
	Cursor string
	// Name and Spec are EventLogChange's log name and spec.
	Name string
	Spec []byte
	// Snapshot is EventSnapshotProgress's report.
	Snapshot replica.SnapshotProgress
}

// SnapshotProgress is the event of the shell's word on its snapshot store
// (replica.SnapshotProgress).
func SnapshotProgress(p replica.SnapshotProgress) Event {
	return Event{Kind: EventSnapshotProgress, Snapshot: p}
}

// Propose is the event of a proposal: records to append as one batch. The
// core owns records from then on (the caller must not modify them).
func Propose(id uint64, records [][]byte) Event {
	return Event{Kind: EventPropose, ID: id, Records: records}
}

// Barrier is the event of a read barrier (replica.ProposeBarrier): a
// proposal without records, resolved with the offset of the control entry
// it appends.
func Barrier(id uint64) Event { return Event{Kind: EventBarrier, ID: id} }

// DeleteBefore is the event of a retention request: delete the entries
// below offset (replica.RequestDeleteBefore: a leader moves its log start,
// a follower or observer asks its leader, R54).
func DeleteBefore(offset uint64) Event { return Event{Kind: EventDeleteBefore, Offset: offset} }

// VoterChange is the event of a voter change (replica.ProposeVoterChange):
// a proposal without records, resolved with the offset of the voter set
// it appends (or, for an add of a node that already votes at the
// directory it fetches from, the offset of the set in force).
func VoterChange(id uint64, ch protocol.VoterChange) Event {
	return Event{Kind: EventVoterChange, ID: id, Change: ch}
}

// Message is the event of a message received from a peer.
func Message(m protocol.Message) Event { return Event{Kind: EventMessage, Message: m} }

// Hint is the event of a membership hint.
func Hint(h replica.Hint) Event { return Event{Kind: EventHint, Hint: h} }

// PeerDown is the event of a connection to or from peer that the peer
// ended (replica.PeerDown).
func PeerDown(peer string) Event { return Event{Kind: EventPeerDown, To: peer} }

// PeerSilent is the event of a peer the node heard nothing from for
// FetchTimeout (replica.PeerSilent).
func PeerSilent(peer string) Event { return Event{Kind: EventPeerSilent, To: peer} }

// Resync is the event of a quiescent message with peer that may have
// been lost (replica.Resync).
func Resync(peer string) Event { return Event{Kind: EventResync, To: peer} }

// Resolved is the outcome of one proposal.
type Resolved struct {
	ID uint64
	// Offset is the offset of the proposal's first record (a barrier's
	// control entry, a voter change's voter set) when Err is nil.
	Offset uint64
	// Err is nil (committed at Offset), a *replica.NotLeaderError or
	// replica.ErrTooLarge (nothing appended), a voter change's refusal
	// (replica.ErrVoterChangePending, ErrUnknownNode, ErrLastVoter,
	// ErrNotCaughtUp: nothing appended), a log change's refusal
	// (replica.ErrLogExists, ErrUnknownLog, ErrFeatureLevelTooLow:
	// nothing appended), the core's halt error for a
	// proposal made after it halted (nothing appended), or an error
	// wrapping replica.ErrUnknownOutcome (with the halt or close cause).
	// A transfer event's Err is its outcome (see Transfer), with no Offset;
	// a cursor read's is nil (Offset is the position) or ErrNoCursor.
	Err error
}

// Claim is the leader (and its epoch) this node believes in, which a node
// advertises in gossip.
type Claim struct {
	Leader string
	Epoch  uint64
}

// Output is what the caller must carry out after a round.
type Output struct {
	// Writes go to the writer, in order (any run of them may go to one
	// Store.Apply); it reports the last durable Seq with Persisted.
	Writes []protocol.Write
	// Messages go to the network.
	Messages []protocol.Message
	// KeyCheckpoint, when not nil, goes to the store
	// (storage.KeyCheckpointStore), before or after Writes, durably or
	// not (replica.Ready.KeyCheckpoint, docs/protocol.md R76).
	KeyCheckpoint *protocol.KeyCheckpoint
	// SnapshotReads are snapshot requests for the caller to answer off
	// its loop (ServeSnapshot), SnapshotChunks the chunks of a snapshot
	// being received for it to write or install, each reported back with
	// an EventSnapshotProgress (replica.Ready, R92-R94).
	SnapshotReads  []replica.SnapshotRead
	SnapshotChunks []replica.SnapshotChunk
	// Resolved are the proposals decided this round, each once.
	Resolved []Resolved
	// Stray are acks of the core for IDs this Node was not waiting for
	// (never in a correct core; the simulation asserts on it).
	Stray []replica.Ack
	// Status is the core's state at the end of the round.
	Status replica.Status
	// ReadableHW is min(HW, durable LEO): readers may read below it.
	// ReadableMoved says it changed since the previous round's (or since
	// New): readers waiting at the old one must be woken.
	ReadableHW    uint64
	ReadableMoved bool
	// Claim is the leader claim of this round; ClaimChanged says it
	// differs from the previous round's (the first round's counts as
	// changed when it names a leader or an epoch).
	Claim        Claim
	ClaimChanged bool
	// LogsChanged says the catalog of named logs (replica.Logs, as of
	// the readable HW, R80) changed since the previous round's (or since
	// New): the first round in which it is known counts as changed.
	LogsChanged bool
	// Deadline is the core's NextDeadline after the round (docs/protocol.md
	// R96): a round without events before it does nothing, so the caller
	// runs one at or after it, and otherwise only when an event comes
	// (R97). Zero: nothing timed is pending.
	Deadline time.Time
	// Halted is the core's halt error (replica.Replica.Err), from the
	// round in which the core halted. The caller must stop serving:
	// every proposal that was waiting is resolved with ErrUnknownOutcome
	// in that round.
	Halted error
}

// Node runs the rounds of one core. It has no goroutines, clock or I/O;
// one caller drives it at a time.
type Node struct {
	r        *replica.Replica
	pending  map[uint64]struct{}
	durable  uint64 // highest Seq reported through Persisted
	given    uint64 // highest Seq handed to the core
	readable uint64
	logs     uint64 // the catalog's version published last (LogsChanged)
	claim    Claim
	halted   error
	closed   bool
	// transfers are the transfer events waiting (transfer.go).
	transfers transferWaits
	// reads are this round's answered cursor reads (keys.go).
	reads []Resolved
}

// New wraps r, which the Node drives from now on: the caller must not call
// r's input methods (Tick, Step, Propose, Hint, Persisted, Ready) itself;
// reading its state (Status, HighWatermark) between rounds is fine.
func New(r *replica.Replica) *Node {
	return &Node{r: r, pending: make(map[uint64]struct{}), readable: r.ReadableHW(), logs: r.LogsVersion()}
}

// Replica returns the core, for reading its state between rounds.
func (n *Node) Replica() *replica.Replica { return n.r }

// Persisted records that every write up to seq is durable. The core hears
// it in the next round, after that round's events and before its Ready,
// whenever the caller reports it: a report never overtakes the events
// of the round it lands in, and an answer stepped in the same round is
// never judged against a stale durable log. Lower or equal seqs are
// ignored.
func (n *Node) Persisted(seq uint64) {
	n.durable = max(n.durable, seq)
}

// Pending is the number of proposals waiting for an outcome.
func (n *Node) Pending() int { return len(n.pending) }

// Round runs one round: Tick(now), then events in order, then Persisted
// with the highest durable Seq reported since the last round, then Ready.
// A round needs to run only when an event comes or at Output.Deadline
// (R96, R97): one without events before it does nothing.
// The order is the Node's, not the caller's: a tick that crosses a fetch
// timeout never comes after the answer it should have let in, and the
// fetch that replaces a timed-out one is built only in Ready, after every
// answer of the round was stepped: an answer that arrives in the round
// whose tick times its fetch out still counts.
//
// After Close, Round does nothing and returns an empty Output.
func (n *Node) Round(now time.Time, events ...Event) Output {
	if n.closed {
		return Output{}
	}
	n.r.Tick(now)
	for _, ev := range events {
		switch ev.Kind {
		case EventPropose:
			n.wait(ev.ID)
			if ev.Key.IsZero() {
				n.r.Propose(ev.ID, ev.Records)
			} else {
				n.r.ProposeKeyed(ev.ID, ev.Key, ev.Records)
			}
		case EventCursor:
			n.wait(ev.ID)
			n.r.ProposeCursor(ev.ID, ev.Key, ev.Cursor, ev.Offset)
		case EventLogChange:
			n.wait(ev.ID)
			n.r.ProposeLogChange(ev.ID, ev.Key, ev.Name, ev.Spec)
		case EventBarrier:
			n.wait(ev.ID)
			n.r.ProposeBarrier(ev.ID)
		case EventVoterChange:
			n.wait(ev.ID)
			n.r.ProposeVoterChange(ev.ID, ev.Change)
		case EventTransfer:
			n.transfer(ev)
		case EventCursorRead:
			n.readCursor(ev)
		case EventMessage:
			n.r.Step(ev.Message)
		case EventHint:
			n.r.Hint(ev.Hint)
		case EventPeerDown:
			n.r.PeerDown(ev.To)
		case EventPeerSilent:
			n.r.PeerSilent(ev.To)
		case EventResync:
			n.r.Resync(ev.To)
		case EventSnapshotProgress:
			n.r.SnapshotProgress(ev.Snapshot)
		case EventDeleteBefore:
			// With no leader known (ErrNotLeader) nothing happens; a halt
			// is reported by the Output.
			_ = n.r.RequestDeleteBefore(ev.Offset)
		default:
			panic(fmt.Sprintf("shell: unknown event kind %d", ev.Kind))
		}
	}
	if n.durable > n.given {
		n.given = n.durable
		n.r.Persisted(n.durable)
	}
	rd := n.r.Ready()
	out := Output{Writes: rd.Writes, Messages: rd.Messages, KeyCheckpoint: rd.KeyCheckpoint,
		SnapshotReads: rd.SnapshotReads, SnapshotChunks: rd.SnapshotChunks}
	for _, a := range rd.Acks {
		if _, ok := n.pending[a.ID]; !ok {
			out.Stray = append(out.Stray, a)
			continue
		}
		delete(n.pending, a.ID)
		out.Resolved = append(out.Resolved, Resolved{ID: a.ID, Offset: a.FirstOffset, Err: a.Err})
	}
	out.Resolved = append(out.Resolved, n.transfersResolved(rd.Transfers)...)
	out.Resolved = append(out.Resolved, n.reads...)
	clear(n.reads)
	n.reads = n.reads[:0]
	if err := n.r.Err(); err != nil {
		n.halted = err
		// The core will never answer what it took before it halted: those
		// appends may or may not be committed.
		out.Resolved = append(out.Resolved, n.resolveAll(fmt.Errorf("%w: %w", replica.ErrUnknownOutcome, err))...)
	}
	out.Halted = n.halted
	out.Status = n.r.Status()
	out.ReadableHW = n.r.ReadableHW()
	out.ReadableMoved = out.ReadableHW != n.readable
	n.readable = out.ReadableHW
	v := n.r.LogsVersion()
	out.LogsChanged = v != n.logs
	n.logs = v
	out.Claim = Claim{Leader: out.Status.LeaderID, Epoch: out.Status.Epoch}
	out.ClaimChanged = out.Claim != n.claim
	n.claim = out.Claim
	out.Deadline = n.r.NextDeadline()
	return out
}

// wait records proposal id as waiting for its outcome.
func (n *Node) wait(id uint64) {
	if _, dup := n.pending[id]; dup {
		panic(fmt.Sprintf("shell: proposal ID %d is already waiting", id))
	}
	n.pending[id] = struct{}{}
}

// Close ends the Node: every proposal still waiting is resolved, in ID
// order, with an error wrapping replica.ErrUnknownOutcome and cause (the
// core took them; the Node will not learn their outcome). Later rounds do
// nothing. Close is for a node that stops: closing, or a failed disk.
func (n *Node) Close(cause error) []Resolved {
	n.closed = true
	return n.resolveAll(fmt.Errorf("%w: %w", replica.ErrUnknownOutcome, cause))
}

// resolveAll resolves every waiting proposal with err, in ID order (so that
// a simulated run does not depend on map order).
func (n *Node) resolveAll(err error) []Resolved {
	if len(n.pending) == 0 {
		return nil
	}
	ids := make([]uint64, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rs := make([]Resolved, len(ids))
	for i, id := range ids {
		rs[i] = Resolved{ID: id, Err: err}
		delete(n.pending, id)
	}
	return rs
}
