package replog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// VoterStatus is one voter of the voter set in force (Status.Voters).
type VoterStatus struct {
	// ID is the voter's node ID.
	ID string `json:"id"`
	// DirectoryID is the data directory of the one incarnation of the
	// node that votes ("" before the cluster recorded its first voter
	// set). The same node running on another (wiped, replaced) directory
	// is not this voter: it fetches as an observer (docs/protocol.md R56).
	DirectoryID string `json:"directory_id"`
	// CaughtUp is known on the leader only (false on other nodes): the
	// leader itself, or a voter whose latest fetch, from DirectoryID and
	// within Options.FetchTimeout, asked for an offset at or above the
	// leader's high watermark (what AddVoter waits for).
	CaughtUp bool `json:"caught_up"`
}

// Incarnation is a node at one of its data directories: a node whose
// directory was wiped comes back as a new incarnation, with a new
// DirectoryID.
type Incarnation struct {
	ID          string `json:"id"`
	DirectoryID string `json:"directory_id"`
}

// voterChangeRetry bounds the wait between tries of a voter change that
// the leader refused for now (another change in progress, the node not
// caught up or not fetching yet): the leader decides again at each try.
const voterChangeRetry = 200 * time.Millisecond

// AddVoter makes node nodeID a voter, at the data directory it fetches
// from, and returns once that change is committed and, unless ctx ends
// first, this node holds it (its Status shows it) (docs/protocol.md R58). It
// works on any node: a follower or observer forwards it to the leader, as
// it does appends. The node must be running and fetching from the leader
// (as an observer: a node whose ID is not in Options.Voters, or a voter
// whose directory was wiped), and it must have caught up with the
// leader's log: AddVoter waits for both, and for any other voter change
// to commit first (one at a time), retrying until ctx ends. Adding a node
// that already votes at the directory it fetches from returns nil at
// once; adding a node whose older incarnation votes replaces it (the old
// one is removed first).
//
// A change is in force once the leader appends it; it needs the new set's
// majority to commit. Growing a cluster from 3 to 4 voters raises its
// majority to 3: add a node that is up and caught up, which AddVoter
// makes sure of.
//
// Errors:
//   - an error wrapping ErrUnknownNode and ctx.Err(): ctx ended while the
//     node did not fetch from the leader (not running, not reachable, or
//     not of this cluster); nothing changed;
//   - an error wrapping ErrNotCaughtUp and ctx.Err(): ctx ended while the
//     node was still catching up; nothing changed;
//   - an error wrapping ErrVoterChangeInProgress and ctx.Err(): ctx ended
//     while another voter change was not committed yet; nothing changed;
//   - an error wrapping ErrNoLeader and ctx.Err(): ctx ended while no
//     leader would take the change;
//   - an error wrapping ErrUnknownOutcome and ctx.Err(): ctx ended after a
//     leader took the change and before this node learned that it was
//     committed (it may be; Status.Voters will tell);
//   - ErrClosed: the Log is closed or closing;
//   - an error wrapping ErrStorageFailed or ErrCommittedTruncation: this
//     node stopped serving.
func (l *Log) AddVoter(ctx context.Context, nodeID string) error {
	return l.changeVoters(ctx, protocol.VoterChange{Add: true, NodeID: nodeID})
}

// RemoveVoter removes node nodeID from the voters and returns once that
// change is committed and, unless ctx ends first, this node holds it
// (docs/protocol.md R58). It works on any node, as
// AddVoter does, and waits for another voter change to commit first. The
// removed node keeps running as an observer (it fetches and serves reads)
// until it is closed. Removing the leader makes it step down once the
// change is committed: the remaining voters elect a new one.
//
// Errors:
//   - an error wrapping ErrUnknownNode: nodeID is not a voter; nothing
//     changed;
//   - an error wrapping ErrLastVoter: nodeID is the last voter; nothing
//     changed;
//   - an error wrapping ErrVoterChangeInProgress and ctx.Err(): ctx ended
//     while another voter change was not committed yet; nothing changed;
//   - an error wrapping ErrNoLeader and ctx.Err(): ctx ended while no
//     leader would take the change;
//   - an error wrapping ErrUnknownOutcome and ctx.Err(): ctx ended after a
//     leader took the change and before this node learned that it was
//     committed;
//   - ErrClosed: the Log is closed or closing;
//   - an error wrapping ErrStorageFailed or ErrCommittedTruncation: this
//     node stopped serving.
func (l *Log) RemoveVoter(ctx context.Context, nodeID string) error {
	return l.changeVoters(ctx, protocol.VoterChange{NodeID: nodeID})
}

// changeVoters proposes ch until the leader commits it, refuses it for
// good, or ctx ends. A change whose outcome is unknown (the leader changed
// while it was in flight) is proposed again: the leader of the moment
// decides from the voter set in force, and answers an add that is already
// done with success and a removal that is already done with ErrUnknownNode
// (taken as done here, since ours may be the one that did it).
func (l *Log) changeVoters(ctx context.Context, ch protocol.VoterChange) error {
	what := "remove voter"
	if ch.Add {
		what = "add voter"
	}
	if ch.NodeID == "" {
		return fmt.Errorf("replog: %s: %w: empty node ID", what, ErrUnknownNode)
	}
	var last error // the latest refusal, for the error at ctx's end
	pol := retryPolicy{
		judge: func(off uint64, err error, uncertain bool) (verdict, uint64, error) {
			if ferr := l.failed(); ferr != nil {
				return fail, 0, ferr
			}
			if !errors.Is(err, ctx.Err()) || last == nil {
				last = err
			}
			var nl *NotLeaderError
			switch {
			case errors.Is(err, ErrClosed):
				return fail, 0, ErrClosed
			case errors.Is(err, ErrUnknownOutcome):
				return againUnknown, 0, err
			case errors.As(err, &nl), errors.Is(err, ErrVoterChangeInProgress), errors.Is(err, ErrNotCaughtUp):
				return again, 0, err // nothing changed: try again
			case errors.Is(err, ErrUnknownNode) && !ch.Add && uncertain:
				return settle, off, nil // removed, maybe by our own earlier try
			case errors.Is(err, ErrUnknownNode) && ch.Add:
				// It may not be fetching yet (starting, or not reached the
				// leader): try again until ctx ends.
				return again, 0, err
			case errors.Is(err, ctx.Err()):
				return again, 0, err // ctx ended before the change was handed over: retry ends it
			}
			// ErrUnknownNode (remove), ErrLastVoter, anything unforeseen.
			return fail, 0, fmt.Errorf("replog: %s %s: %w", what, ch.NodeID, err)
		},
		ended: func(_, ctxErr error) error { return l.voterChangeEnded(ch, what, last, ctxErr) },
		// A try of unknown outcome may have made the change.
		settled: func() bool { return l.voterChangeShown(ch) },
		unknown: func(cause error) error {
			return fmt.Errorf("replog: %s %s: %w: %w", what, ch.NodeID, ErrUnknownOutcome, cause)
		},
		maxWait: voterChangeRetry,
	}
	committed := false // a try of ours committed (not merely found done)
	off, err := retry(ctx, l.closing, &pol, func() (uint64, error) {
		off, err := l.submit(ctx, &request{ev: shell.VoterChange(0, ch)})
		committed = err == nil
		return off, err
	})
	if committed {
		l.waitHolds(ctx, off)
	}
	return err
}

// waitHolds waits until this node's readable high watermark has passed
// offset (the committed voter set's entry: then this node's Status shows
// it), or ctx ends, or the node stops. The change is committed either way.
func (l *Log) waitHolds(ctx context.Context, offset uint64) {
	for {
		hw, changed := l.hwWait()
		if changed == nil || hw > offset || l.failed() != nil {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// voterChangeShown reports whether this node's committed voter set shows
// change ch done.
func (l *Log) voterChangeShown(ch protocol.VoterChange) bool {
	st := l.Status()
	recorded := len(st.Voters) > 0 && st.Voters[0].DirectoryID != ""
	if !recorded || st.HighWatermark <= st.VotersOffset {
		return false
	}
	in := slices.ContainsFunc(st.Voters, func(v VoterStatus) bool { return v.ID == ch.NodeID })
	return in == ch.Add
}

// voterChangeEnded is changeVoters' answer once ctx ended while no try's
// outcome was unknown: why the change was not done (last is the latest
// refusal), with ctxErr.
func (l *Log) voterChangeEnded(ch protocol.VoterChange, what string, last, ctxErr error) error {
	var nl *NotLeaderError
	switch {
	case errors.As(last, &nl) || l.statusNow().LeaderID == "":
		return fmt.Errorf("replog: %s %s: %w (%w)", what, ch.NodeID, ErrNoLeader, ctxErr)
	case errors.Is(last, ErrUnknownNode):
		return fmt.Errorf("replog: %s %s: %w: it does not fetch from the leader (not running, or not reaching it) (%w)", what, ch.NodeID, ErrUnknownNode, ctxErr)
	case errors.Is(last, ErrNotCaughtUp):
		return fmt.Errorf("replog: %s %s: %w: still catching up with the leader's log (%w)", what, ch.NodeID, ErrNotCaughtUp, ctxErr)
	case errors.Is(last, ErrVoterChangeInProgress):
		return fmt.Errorf("replog: %s %s: %w: another voter change is not committed yet (%w)", what, ch.NodeID, ErrVoterChangeInProgress, ctxErr)
	}
	return fmt.Errorf("replog: %s %s: %w", what, ch.NodeID, ctxErr)
}

// voterView fills st's voter fields from the core's status cs, reusing
// prev's slices when they are unchanged (published snapshots are never
// modified: Status hands out copies), so that a quiet round allocates
// nothing for them.
func voterView(st *Status, cs *replica.Status, prev *Status) {
	st.VotersOffset, st.DirectoryID = cs.VotersOffset, cs.DirID
	same := prev != nil && len(prev.Voters) == len(cs.Voters)
	for i := 0; same && i < len(cs.Voters); i++ {
		v := cs.Voters[i]
		same = prev.Voters[i] == VoterStatus{ID: v.ID, DirectoryID: v.DirID, CaughtUp: cs.CaughtUp[v.ID]}
	}
	if same {
		st.Voters = prev.Voters
	} else {
		st.Voters = make([]VoterStatus, len(cs.Voters))
		for i, v := range cs.Voters {
			st.Voters[i] = VoterStatus{ID: v.ID, DirectoryID: v.DirID, CaughtUp: cs.CaughtUp[v.ID]}
		}
	}
	st.Observers = incarnations(cs.Observers)
	st.Replacing = incarnations(cs.Replacing)
}

// incarnations lists m (node ID → directory) sorted by ID; nil if empty.
func incarnations(m map[string]string) []Incarnation {
	if len(m) == 0 {
		return nil
	}
	out := make([]Incarnation, 0, len(m))
	for id, dir := range m {
		out = append(out, Incarnation{ID: id, DirectoryID: dir})
	}
	slices.SortFunc(out, func(a, b Incarnation) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// voterIDs returns the IDs of vs, reusing prev when they are the same.
func voterIDs(vs []VoterStatus, prev []string) []string {
	if len(prev) == len(vs) {
		same := true
		for i := range vs {
			same = same && prev[i] == vs[i].ID
		}
		if same {
			return prev
		}
	}
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	return ids
}
