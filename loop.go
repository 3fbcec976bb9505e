package replog

import (
	"fmt"
	"time"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
)

// maxEventsPerRound bounds how many queued events the loop feeds the core
// before it collects the core's Ready: enough to batch a burst of appends
// into one write, few enough to keep latency flat.
const maxEventsPerRound = 256

// loop is the only goroutine that touches the core. Each round it waits for
// an event, drains what else is queued, then carries out the core's Ready:
// writes to the writer goroutine, messages to the transport, acks to the
// waiting Append calls.
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
	var lastPersisted uint64
	var advertised leaderClaim

	handle := func(ev any) {
		switch ev := ev.(type) {
		case *proposal:
			nextID++
			pending[nextID] = ev
			l.core.Propose(nextID, ev.records)
		case protocol.Message:
			l.core.Step(ev)
		case membership.Hint:
			if h, ok := coreHint(ev); ok {
				l.core.Hint(h)
			}
		}
	}

	for {
		// Wait for one event.
		var first any
		select {
		case <-l.closing:
			l.failPending(pending)
			return
		case p := <-l.proposals:
			first = p
		case m, ok := <-recv:
			if !ok {
				recv = nil
				continue
			}
			first = m
		case h, ok := <-hints:
			if !ok {
				hints = nil
				continue
			}
			first = h
		case <-l.wakeLoop:
		case <-ticker.C:
		}
		if err := l.failed(); err != nil {
			// The disk refused a write, or the core halted: stop serving
			// rather than acknowledge anything the disk may not hold.
			l.failAll(pending, fmt.Errorf("%w: %w", ErrUnknownOutcome, err))
			l.publish()
			for {
				select {
				case <-l.closing:
					return
				case p := <-l.proposals:
					p.result <- proposalResult{err: err}
				}
			}
		}
		l.core.Tick(time.Now())
		if first != nil {
			handle(first)
		}
		// Drain what else is waiting, without blocking.
	drain:
		for i := 0; i < maxEventsPerRound; i++ {
			select {
			case p := <-l.proposals:
				handle(p)
			case m, ok := <-recv:
				if !ok {
					recv = nil
					break drain
				}
				handle(m)
			default:
				break drain
			}
		}
		if seq := l.persisted.Load(); seq > lastPersisted {
			lastPersisted = seq
			l.core.Persisted(seq)
		}

		rd := l.core.Ready()
		if err := l.core.Err(); err != nil && l.failed() == nil {
			// The core refused to go on (it was told to destroy committed
			// entries, or ran out of epochs): stop serving, loudly, the way
			// a failed disk write stops the node.
			l.logger.Error("replica halted: this node stops serving; close it and investigate", "error", err)
			l.failErr.CompareAndSwap(nil, &err)
			select {
			case l.wakeLoop <- struct{}{}:
			default:
			}
		}
		l.writer.enqueue(rd.Writes)
		for _, m := range rd.Messages {
			if err := l.tr.Send(m); err != nil {
				l.logger.Trace("send", "to", m.To, "error", err)
			}
		}
		for _, a := range rd.Acks {
			p, ok := pending[a.ID]
			if !ok {
				continue
			}
			delete(pending, a.ID)
			p.result <- proposalResult{offset: a.FirstOffset, err: a.Err}
		}
		st := l.publish()
		if c := (leaderClaim{st.LeaderID, st.Epoch}); l.ml != nil && c != advertised {
			advertised = c
			l.advertiseLeader(st.LeaderID, st.Epoch)
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
				l.logger.Debug("gossip leader update", "error", err)
			}
		}
	}
}

// publish stores a Status snapshot and wakes readers if the readable
// high watermark moved.
func (l *Log) publish() *Status {
	cs := l.core.Status()
	st := &Status{
		NodeID:        cs.ID,
		Role:          cs.Role.String(),
		Epoch:         cs.Epoch,
		LeaderID:      cs.LeaderID,
		Voters:        l.opts.Voters,
		LEO:           cs.LEO,
		DurableLEO:    cs.DurableLEO,
		HighWatermark: cs.HighWatermark,
		ReadableHW:    l.core.ReadableHW(),
		LogStart:      cs.LogStart,
		RemoteLEO:     cs.RemoteLEO,
	}
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

	// Readers are bounded by what this node holds durably, not by the HW
	// alone: a leader can see an entry committed by two followers before
	// its own write of it is done. A failure wakes them too, to end.
	l.hwMu.Lock()
	if (st.ReadableHW != l.hw || failed != nil) && l.hwChanged != nil {
		l.hw = st.ReadableHW
		close(l.hwChanged)
		l.hwChanged = make(chan struct{})
	}
	l.hwMu.Unlock()
	return st
}

// failPending answers every waiting proposal when the log closes: they were
// handed to the core, so their outcome is unknown.
func (l *Log) failPending(pending map[uint64]*proposal) {
	l.failAll(pending, fmt.Errorf("%w: %w", ErrClosed, ErrUnknownOutcome))
}

func (l *Log) failAll(pending map[uint64]*proposal, err error) {
	for id, p := range pending {
		p.result <- proposalResult{err: err}
		delete(pending, id)
	}
}
