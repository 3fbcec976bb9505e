package replog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/replica"
)

// Errors of TransferLeadership (docs/protocol.md R59).
var (
	// ErrNoSuccessor: TransferLeadership named a node that is not another
	// voter, or, with "", no other voter fetches from the leader (a single
	// voter, or the others are down). Nothing changed.
	ErrNoSuccessor = replica.ErrNoSuccessor
	// ErrTransferInProgress: a transfer to another node is under way.
	// Nothing changed.
	ErrTransferInProgress = replica.ErrTransferInProgress
	// ErrTransferTimedOut: the successor did not fetch the leader's whole
	// log within Options.FetchTimeout; the leader leads on and takes the
	// appends it held.
	ErrTransferTimedOut = replica.ErrTransferTimedOut
)

// DefaultCloseTransferTimeout is Options.CloseTransferTimeout's default.
const DefaultCloseTransferTimeout = time.Second

// TransferLeadership hands this node's leadership over to voter to, or,
// with to == "", to the voter with the longest log among those that fetch
// from it, and returns once another node leads (docs/protocol.md R59;
// KRaft's EndQuorumEpoch with a preferred successor). It is called on the
// leader: on any other node it returns a *NotLeaderError naming the leader
// this node knows (call it there).
//
// From the call on, the leader appends nothing new: appends made on any
// node wait (they do not fail). The leader waits until the successor has
// fetched its whole log and all of it is committed, then tells every voter
// that it steps down, and the successor stands for election at once, with
// no election timeout. The appends that waited are then refused by the
// old leader as never appended, and Append, AppendBatch, AppendAsync and
// Barrier send them again to the new leader themselves: nothing is lost,
// nothing is appended twice. What was appended before the call is
// committed before the hand-over. A successor that does not catch up
// within Options.FetchTimeout ends the transfer: the leader leads on.
//
// It returns nil once this node knows another leader (normally to; if
// the successor lost its election, whoever won). Errors:
//   - a *NotLeaderError (ErrNotLeader): this node does not lead, or its
//     leadership ended otherwise (a newer epoch, lost contact with a
//     majority) before the transfer completed;
//   - an error wrapping ErrNoSuccessor or ErrTransferInProgress: nothing
//     changed;
//   - an error wrapping ErrTransferTimedOut: the successor did not catch
//     up; this node leads on;
//   - an error wrapping ctx.Err(): ctx ended first; the transfer may still
//     complete (the leader gives up after FetchTimeout);
//   - ErrClosed: the Log is closed or closing;
//   - an error wrapping ErrStorageFailed or ErrCommittedTruncation: this
//     node stopped serving.
//
// A second call while a transfer is under way joins it when it names the
// same successor, or none; Close on a leader transfers first (see
// Options.CloseTransferTimeout).
func (l *Log) TransferLeadership(ctx context.Context, to string) error {
	_, err := retry(ctx, l.closing, once(func(err error) error {
		if ferr := l.failed(); ferr != nil {
			return ferr
		}
		var nl *NotLeaderError
		switch {
		case errors.Is(err, ErrClosed):
			return ErrClosed
		case errors.As(err, &nl):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("replog: transfer leadership: %w", ctx.Err())
		}
		return fmt.Errorf("replog: transfer leadership: %w", err)
	}), func() (uint64, error) { return l.submit(ctx, &request{ev: shell.Transfer(0, to)}) })
	if err != nil {
		return err
	}
	for {
		v := l.watch.view()
		if v.changed == nil {
			return ErrClosed
		}
		if err := l.failed(); err != nil {
			return err
		}
		if v.ev.LeaderID != "" && v.ev.LeaderID != l.opts.NodeID {
			return nil
		}
		select {
		case <-v.changed:
		case <-ctx.Done():
			return fmt.Errorf("replog: transfer leadership: handed over, no new leader known yet: %w", ctx.Err())
		}
	}
}

// transferBeforeClose hands the leadership over, if this node leads, for
// at most Options.CloseTransferTimeout (negative: never), so that the
// cluster does not wait out an election timeout for the leader that
// leaves. It is skipped when gossip knows no other live member (nobody to
// hand over to: a whole cluster closing).
func (l *Log) transferBeforeClose() {
	d := l.opts.CloseTransferTimeout
	if d < 0 || l.statusNow().Role != RoleLeader || l.failed() != nil {
		return
	}
	if l.ml != nil && !l.othersAlive() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	if err := l.TransferLeadership(ctx, ""); err != nil {
		l.logger.Info("closing without handing the leadership over", "error", err, "waited", time.Since(start))
		return
	}
	l.logger.Info("closing: leadership handed over", "leader", l.statusNow().LeaderID, "took", time.Since(start))
}

// othersAlive reports whether gossip knows another live member.
func (l *Log) othersAlive() bool {
	for _, m := range l.ml.Members() {
		if m.ID != l.opts.NodeID && m.Alive {
			return true
		}
	}
	return false
}
