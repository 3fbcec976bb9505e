package replog

import (
	"errors"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Errors returned by Log methods. Test with errors.Is (and errors.As for
// *NotLeaderError); returned errors wrap these with context.
var (
	// ErrClosed: the Log was closed (or is closing). An append that was
	// already submitted when Close began fails with an error wrapping both
	// ErrClosed and ErrUnknownOutcome.
	ErrClosed = errors.New("replog: log closed")

	// ErrInvalidOptions wraps every Options.Validate failure; the message
	// names the field.
	ErrInvalidOptions = errors.New("replog: invalid options")

	// ErrNotLeader: no leader could take the append; nothing was appended.
	// The concrete error is a *NotLeaderError carrying the leader's ID when
	// one is known.
	ErrNotLeader = replica.ErrNotLeader

	// ErrUnknownOutcome: the append was handed to a leader that lost its
	// leadership (or the caller's context ended, or the Log closed) before
	// the entry was committed. It may or may not be in the log; retrying may
	// store it twice.
	ErrUnknownOutcome = replica.ErrUnknownOutcome

	// ErrTooLarge: a record exceeds Options.MaxRecordSize, or a batch what
	// one transport frame carries; the message says the sizes and, in a
	// batch, which record. Nothing was appended.
	ErrTooLarge = replica.ErrTooLarge

	// ErrInvalidArgument: an argument is outside its documented range (a
	// WithID ID or a cursor name that is empty or longer than
	// MaxIDLength, a snapshot offset above the readable high watermark);
	// the message says which and why. Nothing was done.
	ErrInvalidArgument = errors.New("replog: invalid argument")

	// ErrCorrupt: the data directory is damaged: a stored entry failed its
	// checksum (the message names the offset), the data file cannot be
	// read (it names the file and what is wrong), or the directory shows
	// that a node lived there but its data file is missing or empty (its
	// vote and log are gone: restore the file, or wipe the directory so
	// the node starts as a new one). Nothing is repaired automatically.
	ErrCorrupt = storage.ErrCorrupt

	// ErrOutOfRange: a read reached an offset below the log start (deleted
	// by retention, before the read started or while it ran). Readers get
	// it wrapped in an *OutOfRangeError naming the log start to resume
	// from.
	ErrOutOfRange = storage.ErrOutOfRange

	// ErrStorageFailed: a write to this node's disk failed. The node stops
	// serving: appends and reads fail with it, Status reports it, and Close
	// returns it. Close the Log and open it again (after fixing the disk);
	// the store refuses further writes rather than risk corrupting itself.
	// Appends that were in flight when it happened get it together with
	// ErrUnknownOutcome.
	ErrStorageFailed = errors.New("replog: storage failed")

	// ErrNoLeader: this node has known no leader for longer than the caller
	// allowed (a reader given a context from WithRequireLeader), or the
	// caller's context ended while it knew none (WaitReady, Barrier). The
	// node may be cut off from a majority of its voters, or an election
	// may be under way; what it reads may be stale. A reader's error names
	// how long the node has known no leader.
	ErrNoLeader = errors.New("replog: no leader")

	// ErrLocked: Open found the log's directory held by another open Log,
	// in this process or another one; the message names the directory,
	// the node and which of the two holds it. Close the other Log, or
	// point Dir elsewhere.
	ErrLocked = storage.ErrLocked

	// ErrCommittedTruncation: a peer told this node to truncate its log
	// below its high watermark, which would destroy committed entries. The
	// node refuses and stops serving, as after ErrStorageFailed: appends
	// and reads fail with an error wrapping it (the message names the
	// offsets), Status reports it, and Close returns it. Nothing was
	// truncated. In a correct cluster it never happens: it means a peer is
	// wrong, hostile or misconfigured, or this node's disk lost data.
	// Investigate before reopening the Log.
	ErrCommittedTruncation = replica.ErrCommittedTruncation

	// ErrIdentityMismatch: Open was pointed at a data directory created
	// for another cluster or node (the directory records both when it is
	// created). The message names the field and both values; nothing in
	// the directory was changed. Point Dir at this node's own directory.
	ErrIdentityMismatch = storage.ErrIdentityMismatch

	// ErrDuplicateNodeID: Open found, while joining gossip, another live
	// process using this node's ID (at another gossip address). Two nodes
	// with one ID would break replication, so the node did not start; the
	// message names both addresses. (A running node that later sees such a
	// process logs it at Error and counts it in Stats.Errors.) Give each
	// node its own ID, or stop the other process.
	ErrDuplicateNodeID = membership.ErrDuplicateNodeID

	// ErrVoterChangeInProgress: AddVoter or RemoveVoter waited for another
	// voter change to commit (one change at a time) until its context
	// ended; nothing changed. The error also wraps ctx.Err().
	ErrVoterChangeInProgress = replica.ErrVoterChangePending

	// ErrUnknownNode: RemoveVoter named a node that is not a voter, or
	// AddVoter's context ended while the node did not fetch from the
	// leader (not running, not reachable); nothing changed.
	ErrUnknownNode = replica.ErrUnknownNode

	// ErrLastVoter: RemoveVoter named the last voter; nothing changed.
	ErrLastVoter = replica.ErrLastVoter

	// ErrNotCaughtUp: AddVoter's context ended while the node was still
	// catching up with the leader's log; nothing changed. The error also
	// wraps ctx.Err().
	ErrNotCaughtUp = replica.ErrNotCaughtUp

	// ErrDuplicate: an append's WithID ID was appended within
	// Options.DedupWindow; nothing was appended, and the call returns the
	// original's offset (docs/protocol.md R64).
	ErrDuplicate = replica.ErrDuplicate

	// ErrBacklogFull: an append's context ended while the leader (this
	// node) had no room for it in its uncommitted backlog
	// (Options.MaxUncommittedBytes, docs/protocol.md R74); nothing was
	// appended. The error also wraps ctx.Err(). On a follower the same
	// wait ends with a *NotLeaderError naming the leader.
	ErrBacklogFull = replica.ErrBacklogFull

	// ErrNoCursor: Cursor names a cursor that was never committed; the
	// message names it.
	ErrNoCursor = shell.ErrNoCursor

	// ErrNoSnapshot: OpenSnapshot found no snapshot of this log on this
	// node (none was saved, or none kept describes this log).
	ErrNoSnapshot = storage.ErrNoSnapshot
)

// NotLeaderError is the concrete error behind ErrNotLeader. LeaderID is the
// leader the node knew ("" if none).
type NotLeaderError = replica.NotLeaderError

// Errors of a Node's named logs (Node.CreateLog, Node.DeleteLog,
// Node.Log).
var (
	// ErrLogExists: CreateLog named a log the catalog holds.
	ErrLogExists = replica.ErrLogExists
	// ErrUnknownLog: the catalog does not hold the log named (or, from
	// Node.Log, it is not open on this node yet).
	ErrUnknownLog = replica.ErrUnknownLog
	// ErrNotReplica: Node.Log named a log this node is not a replica of.
	ErrNotReplica = errors.New("replog: this node is not a replica of the log")
	// ErrFeatureLevelTooLow: the cluster's feature level is below
	// protocol.FeatureLevelNamedLogs, the level a catalog change needs.
	ErrFeatureLevelTooLow = replica.ErrFeatureLevelTooLow
)
