package replog

import (
	"runtime"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// maxEventsPerRound bounds how many queued events the loop feeds the core
// before it collects the core's Ready: enough to batch a burst of appends
// into one write, few enough to keep latency flat.
const maxEventsPerRound = 256

// loop is the only goroutine that touches the core. It pumps the channels
// into the deterministic shell.Node, which runs the round (its order of
// Tick, Step, Persisted and Ready is the Node's, and the simulation drives
// the same Node): each round it waits for an event, drains what else is
// queued, runs the round, then carries out the Output: writes to the writer
// goroutine, messages to the transport, outcomes to the waiting Append
// calls, a Status snapshot, a reader wake-up and the gossip leader claim.
func (l *Log) loop() {
	defer l.wg.Done()
	defer close(l.loopDone)
	ticker := time.NewTicker(tickInterval)
	defer ticker.Stop()

	var recv <-chan protocol.Message
	if l.tr != nil {
		recv = l.tr.Receive()
	}
	var hints <-chan membership.Hint
	if l.ml != nil {
		hints = l.ml.Hints()
	}
	pending := make(map[uint64]*proposal)
	var nextID uint64
	events := make([]shell.Event, 0, maxEventsPerRound+1)

	add := func(ev any) {
		switch ev := ev.(type) {
		case *proposal:
			if ev.query != "" {
				// A cursor read (cursors.go): the core's table as of its
				// readable HW, now.
				next, ok := l.node.Cursor(ev.query)
				var err error
				if !ok {
					err = ErrNoCursor
				}
				l.deliver(ev, proposalResult{offset: next, err: err})
				return
			}
			nextID++
			pending[nextID] = ev
			switch {
			case ev.barrier:
				events = append(events, shell.Barrier(nextID))
			case ev.change != nil:
				events = append(events, shell.VoterChange(nextID, *ev.change))
			case ev.transfer != nil:
				events = append(events, shell.Transfer(nextID, ev.transfer.to))
			case ev.cursor != "":
				events = append(events, shell.CommitCursor(nextID, ev.key, ev.cursor, ev.cursorNext))
			case !ev.key.IsZero():
				events = append(events, shell.ProposeKeyed(nextID, ev.key, ev.records))
			default:
				events = append(events, shell.Propose(nextID, ev.records))
			}
		case protocol.Message:
			events = append(events, shell.Message(ev))
		case membership.Hint:
			if h, ok := coreHint(ev); ok {
				events = append(events, shell.Hint(h))
			}
		}
	}
	resolve := func(rs []shell.Resolved) {
		for _, r := range rs {
			p, ok := pending[r.ID]
			if !ok {
				continue
			}
			delete(pending, r.ID)
			l.deliver(p, proposalResult{offset: r.Offset, err: r.Err})
		}
	}

	for {
		// Wait for one event.
		proposed := false
		select {
		case <-l.closing:
			resolve(l.node.Close(ErrClosed))
			l.failRetries(ErrClosed)
			return
		case p := <-l.proposals:
			add(p)
			proposed = true
		case off := <-l.deletes:
			events = append(events, shell.DeleteBefore(off))
		case m, ok := <-recv:
			if !ok {
				recv = nil
				continue
			}
			add(m)
		case h, ok := <-hints:
			if !ok {
				hints = nil
				continue
			}
			add(h)
		case <-l.wakeLoop:
		case <-ticker.C:
		}
		if err := l.failed(); err != nil {
			// The disk refused a write, or the core halted: stop serving
			// rather than acknowledge anything the disk may not hold.
			resolve(l.node.Close(err))
			l.failProposals(events, pending, err)
			l.failRetries(err)
			l.publish(l.node.Replica().Status(), l.node.Replica().ReadableHW(), true)
			for {
				select {
				case <-l.closing:
					return
				case p := <-l.proposals:
					l.deliver(p, proposalResult{err: err})
				case <-l.deletes:
					// DeleteBefore sees the failure at its next check.
				}
			}
		}
		if proposed {
			// Yield once before draining, so that the appenders that are
			// runnable (those the last rounds answered, about to append
			// again) queue their proposals first. Without it the first one
			// to send wakes this goroutine, which Go runs ahead of the
			// others: each round takes one or two proposals and pays the
			// round's fixed cost (Tick, Ready, Status, publish, a writer
			// wake-up) for each.
			runtime.Gosched()
		}
		// Drain what else is waiting, without blocking.
	drain:
		for i := 0; i < maxEventsPerRound; i++ {
			select {
			case p := <-l.proposals:
				add(p)
			case m, ok := <-recv:
				if !ok {
					recv = nil
					break drain
				}
				add(m)
			default:
				break drain
			}
		}
		l.retryDue(add)
		l.node.Persisted(l.persisted.Load())
		now := time.Now()
		out := l.node.Round(now, events...)
		l.stats.round(now, events, &out)
		clear(events)
		events = events[:0]
		if out.Halted != nil && l.failed() == nil {
			// The core refused to go on (it was told to destroy committed
			// entries, or ran out of epochs): stop serving, loudly, the way
			// a failed disk write stops the node.
			l.logger.Error("replica halted: this node stops serving; close it and investigate", "error", out.Halted)
			err := out.Halted
			l.failErr.CompareAndSwap(nil, &err)
			select {
			case l.wakeLoop <- struct{}{}:
			default:
			}
		}
		l.writer.enqueue(out.Writes)
		for _, m := range out.Messages {
			if err := l.tr.Send(m); err != nil {
				l.stats.count(errKindSend)
				l.logger.Trace("send", "to", m.To, "error", err)
			}
		}
		// The view first: a caller whose append this round answers then
		// sees it in Status (and a single node's readers are woken) when
		// Append returns.
		l.publish(out.Status, out.ReadableHW, out.ReadableMoved)
		resolve(out.Resolved)
		if l.ml != nil && out.ClaimChanged {
			l.advertiseLeader(out.Claim.Leader, out.Claim.Epoch)
		}
	}
}

// failProposals answers the proposals of a round that never ran: they
// never reached the core, so nothing was appended.
func (l *Log) failProposals(events []shell.Event, pending map[uint64]*proposal, err error) {
	for _, ev := range events {
		if ev.Kind != shell.EventPropose && ev.Kind != shell.EventBarrier && ev.Kind != shell.EventVoterChange && ev.Kind != shell.EventTransfer && ev.Kind != shell.EventCursor {
			continue
		}
		if p, ok := pending[ev.ID]; ok {
			delete(pending, ev.ID)
			l.deliver(p, proposalResult{err: err})
		}
	}
}

// leaderClaim is the leader and epoch this node advertises in gossip.
type leaderClaim struct {
	id    string
	epoch uint64
}

// advertiseLeader hands the latest claim to the advertiser goroutine,
// replacing one it has not taken yet: only the newest claim matters, and
// one goroutine keeps the updates in order.
func (l *Log) advertiseLeader(id string, epoch uint64) {
	c := leaderClaim{id, epoch}
	for {
		select {
		case l.claims <- c:
			return
		default:
		}
		select {
		case <-l.claims:
		default:
		}
	}
}

// advertiser puts the claims into gossip metadata, off the loop: a
// memberlist update may wait on the network.
func (l *Log) advertiser() {
	defer l.wg.Done()
	for {
		select {
		case <-l.closing:
			return
		case c := <-l.claims:
			if err := l.ml.SetLeader(c.id, c.epoch); err != nil {
				l.stats.count(errKindGossipAdvertise)
				l.logger.Debug("gossip leader update", "error", err)
			}
		}
	}
}

// publish stores a Status snapshot of the core's state cs and, when wake
// says the readable high watermark moved (or the node failed), wakes the
// readers.
func (l *Log) publish(cs replica.Status, readable uint64, wake bool) {
	st := &Status{
		NodeID:        cs.ID,
		Role:          roleOf(cs.Role),
		Epoch:         cs.Epoch,
		LeaderID:      believedLeader(cs),
		LEO:           cs.LEO,
		DurableLEO:    cs.DurableLEO,
		HighWatermark: cs.HighWatermark,
		ReadableHW:    readable,
		LogStart:      cs.LogStart,
		RemoteLEO:     cs.RemoteLEO,
	}
	prev := l.status.Load()
	voterView(st, &cs, prev)
	if l.tcp != nil {
		st.RPCAddr = l.opts.AdvertiseRPCAddr
		if st.RPCAddr == "" {
			st.RPCAddr = l.tcp.Addr()
		}
	}
	if l.ml != nil {
		st.GossipAddr = l.ml.GossipAddr()
	}
	failed := l.failed()
	if failed != nil {
		st.Error = failed.Error()
	}
	l.status.Store(st)
	l.voterIDs = voterIDs(st.Voters, l.voterIDs)
	l.watch.update(Event{Role: st.Role, LeaderID: st.LeaderID, Epoch: st.Epoch, Voters: l.voterIDs}, failed != nil)

	// Readers are bounded by what this node holds durably, not by the HW
	// alone: a leader can see an entry committed by two followers before
	// its own write of it is done. A failure wakes them too, to end.
	l.hwMu.Lock()
	if (wake || failed != nil) && l.hwChanged != nil {
		l.hw = readable
		close(l.hwChanged)
		l.hwChanged = make(chan struct{})
	}
	l.hwMu.Unlock()
}
