package replica

import "errors"

// ErrInvalidConfig is wrapped by the errors of Config.Validate (a
// *ConfigError naming the field) and New (which also refuses a nil log).
var ErrInvalidConfig = errors.New("replog: invalid replica config")

// Errors that halt a replica (see Err).
var (
	// ErrCommittedTruncation: this replica was told to truncate its log
	// below its HW, which would destroy committed entries. It refuses and
	// halts instead: nothing committed is ever destroyed on anyone's word.
	// In a correct cluster this never happens; it means a peer is wrong,
	// lying or misconfigured (or this node's disk lost data).
	ErrCommittedTruncation = errors.New("replog: refused to truncate committed entries")
	// ErrEpochExhausted: starting an election would take the epoch to
	// MaxEpoch.
	ErrEpochExhausted = errors.New("replog: epochs exhausted")
	// ErrFeatureLevel: the log committed a cluster feature level above
	// Config.SupportedFeatureLevel (R68): entries past it may use formats
	// this node cannot read, so it halts rather than misread them. The
	// cluster's level is never lowered: run a release that supports it.
	ErrFeatureLevel = errors.New("replog: cluster feature level above what this node supports")
)

// Errors reported in Acks.
var (
	// ErrNotLeader is wrapped by *NotLeaderError.
	ErrNotLeader = errors.New("replog: not the leader")
	// ErrUnknownOutcome: the proposal may or may not have been committed
	// (leadership changed while it was in flight).
	ErrUnknownOutcome = errors.New("replog: append outcome unknown")
	// ErrTooLarge: a record exceeds MaxRecordSize.
	ErrTooLarge = errors.New("replog: record too large")
	// ErrVoterChangePending: a voter change was refused, nothing changed:
	// another one is not committed yet, or the leader has not yet
	// committed an entry of its epoch (R58). Retrying later succeeds.
	ErrVoterChangePending = errors.New("replog: a voter change is in progress")
	// ErrUnknownNode: a voter change names a node the leader cannot add
	// (it does not fetch from the leader now) or remove (not a voter).
	ErrUnknownNode = errors.New("replog: unknown node")
	// ErrLastVoter: a voter change would remove the last voter.
	ErrLastVoter = errors.New("replog: cannot remove the last voter")
	// ErrNotCaughtUp: the node to add has not caught up with the leader's
	// log yet; nothing changed. Retrying later succeeds.
	ErrNotCaughtUp = errors.New("replog: node not caught up")
	// ErrBacklogFull: the leader's uncommitted backlog is at
	// Config.MaxUncommittedBytes (R74); nothing was appended. Retrying
	// once earlier appends commit succeeds.
	ErrBacklogFull = errors.New("replog: the leader's uncommitted backlog is full")
	// ErrLogExists: a log change creates a name the catalog holds (R80);
	// nothing appended.
	ErrLogExists = errors.New("replog: log exists")
	// ErrUnknownLog: a log change deletes a name the catalog does not
	// hold (R80); nothing appended.
	ErrUnknownLog = errors.New("replog: unknown log")
	// ErrFeatureLevelTooLow: the cluster's feature level (R68) does not
	// allow what was asked yet (a log change needs level 9); nothing
	// appended. It is raised once every node runs a release that
	// supports the level.
	ErrFeatureLevelTooLow = errors.New("replog: cluster feature level too low")
)

// Errors of TransferLeadership (R59).
var (
	// ErrNoSuccessor: no voter to hand leadership over to (the one named
	// is not another voter, or no other voter fetches from the leader).
	ErrNoSuccessor = errors.New("replog: no voter to hand leadership over to")
	// ErrTransferInProgress: a transfer to another node is under way.
	ErrTransferInProgress = errors.New("replog: a leadership transfer to another node is in progress")
	// ErrTransferTimedOut: the successor did not catch up in time; the
	// leader leads on and appends again.
	ErrTransferTimedOut = errors.New("replog: leadership transfer timed out")
)

// NotLeaderError says the proposal reached no leader. LeaderID is the
// leader this replica knows ("" if none). Nothing was appended, and nothing
// will be: a forwarded proposal names the epoch of the leader it was sent
// to (protocol.AppendRequest.Epoch) and is appended only by the leader of
// exactly that epoch; a node answers not-leader only for its own current
// epoch when it does not lead it and never did (or, R59, for the requests
// of an epoch it handed over, in this life, that it never appended: those
// it held, and those that arrive after the hand-over), and no
// node can come to lead an epoch later (an election always moves to a new
// one). So no copy
// of the request, however late, even one delivered after the receiver
// restarted, is ever appended. Copies within one life of the receiver are
// answered from its memory of the requests it handled.
type NotLeaderError struct {
	LeaderID string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "replog: not the leader (no leader known)"
	}
	return "replog: not the leader (leader is " + e.LeaderID + ")"
}

// Unwrap returns ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
