package replog

import (
	"runtime"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// maxEventsPerRound bounds how many queued events the loop feeds the core
// before it collects the core's Ready: enough to batch a burst of appends
// into one write, few enough to keep latency flat.
const maxEventsPerRound = 256

// loop is the only goroutine that touches the core. It pumps the channels
// into the deterministic shell.Node, which runs the round (its order of
// Tick, Step, Persisted and Ready is the Node's, and the simulation drives
// the same Node): each round it waits for an event, drains what else is
// queued, runs the round, then carries out the Output. Time passing is an
// event only at the round's deadline (docs/protocol.md R96, R97): the
// process's deadline scheduler wakes the loop then. A failed node stops
// pumping and only answers (failed).
func (l *Log) loop() {
	defer l.wg.Done()
	defer close(l.loopDone)
	p := l.newPump()
	defer l.net.sched.set(p.dl, time.Time{}, time.Time{})
	// The first round at once: New may have left writes for Ready (a
	// single voter's self-vote), and its deadline is not known yet.
	p.step()
	for {
		requested, open := p.wait()
		if !open {
			p.resolve(l.node.Close(ErrClosed))
			l.failRetries(ErrClosed)
			return
		}
		if err := l.failed(); err != nil {
			p.failed(err)
			return
		}
		if requested {
			// Yield once before draining, so that the appenders that are
			// runnable (those the last rounds answered, about to append
			// again) queue their requests first. Without it the first one
			// to send wakes this goroutine, which Go runs ahead of the
			// others: each round takes one or two requests and pays the
			// round's fixed cost (Tick, Ready, Status, publish, a writer
			// wake-up) for each.
			runtime.Gosched()
		}
		p.drain()
		p.step()
	}
}

// step runs a round, carries out its Output and hands the scheduler the
// next deadline (after the Output: an outcome may queue an asynchronous
// append's retry).
func (p *pump) step() {
	now := time.Now()
	out := p.round(now)
	p.carryOut(&out)
	p.schedule(out.Deadline, now)
}

// schedule hands the scheduler the loop's next deadline after a round at
// now: the core's (Output.Deadline) or the earliest asynchronous append
// due to be tried again, whichever comes first.
func (p *pump) schedule(core, now time.Time) {
	at := core
	for _, it := range p.l.retries {
		if at.IsZero() || it.at.Before(at) {
			at = it.at
		}
	}
	p.l.net.sched.set(p.dl, at, now)
}

// pump is the loop goroutine's state: the inputs it reads, the events of
// the round being collected, and the requests waiting for their outcome.
type pump struct {
	l       *Log
	recv    <-chan protocol.Message // nil once the transport closed it
	hints   <-chan membership.Hint  // nil once gossip closed it
	down    <-chan string           // the transport's PeerDown; nil once closed
	silent  <-chan string           // the node's contact reports (R99, R100): Open's
	resync  <-chan string
	reports *contactReports // a Node's log's (nil for Open's)
	woken   <-chan struct{} // reports.wake
	dl      *deadlineEntry  // this loop's place in the deadline scheduler
	events  []shell.Event
	pending map[uint64]*request // by event ID
	nextID  uint64
}

func (l *Log) newPump() *pump {
	p := &pump{
		l:  l,
		dl: l.net.sched.newEntry(l.wakeLoop),
		// events grows to what the rounds hold (a busy log's up to
		// maxEventsPerRound+1, kept): an idle log's few events need no
		// 80 KiB array.
		events:  nil,
		pending: make(map[uint64]*request),
	}
	if l.tr != nil {
		p.recv = l.tr.Receive()
	}
	p.down, p.hints = l.net.down, l.net.hints
	p.silent, p.resync = l.net.silent, l.net.resync
	if p.reports = l.net.reports; p.reports != nil {
		p.woken = p.reports.wake
	}
	return p
}

// wait waits for one event and adds it to the round. It reports whether
// the event was a request, and open false once the Log is closing.
func (p *pump) wait() (requested, open bool) {
	l := p.l
	for {
		select {
		case <-l.closing:
			return false, false
		case r := <-l.requests:
			p.add(r)
			return true, true
		case off := <-l.deletes:
			p.events = append(p.events, shell.DeleteBefore(off))
		case m, ok := <-p.recv:
			if !ok {
				p.recv = nil
				continue
			}
			p.message(m)
		case h, ok := <-p.hints:
			if !ok {
				p.hints = nil
				continue
			}
			if h, ok := coreHint(h); ok {
				p.events = append(p.events, shell.Hint(h))
			}
		case id, ok := <-p.down:
			if !ok {
				p.down = nil
				continue
			}
			p.events = append(p.events, shell.PeerDown(id))
		case id := <-p.silent:
			p.events = append(p.events, shell.PeerSilent(id))
		case id := <-p.resync:
			p.events = append(p.events, shell.Resync(id))
		case <-p.woken:
			silent, resync := p.reports.take()
			for _, id := range silent {
				p.events = append(p.events, shell.PeerSilent(id))
			}
			for _, id := range resync {
				p.events = append(p.events, shell.Resync(id))
			}
		case sp := <-l.ship.progress:
			p.events = append(p.events, shell.SnapshotProgress(sp))
		case <-l.wakeLoop: // persisted, failed, or the deadline passed
		}
		return false, true
	}
}

// drain adds what else is queued, without blocking, up to a round's worth.
func (p *pump) drain() {
	l := p.l
	for i := 0; i < maxEventsPerRound; i++ {
		select {
		case r := <-l.requests:
			p.add(r)
		case m, ok := <-p.recv:
			if !ok {
				p.recv = nil
				return
			}
			p.message(m)
		default:
			return
		}
	}
}

// message adds m to the round if it is this Log's: a message naming
// another log (a Node's named log, sent to a node that runs this Log with
// Open) is dropped, as one for an unknown log is by a Node's router
// (docs/logs.md): taken, it would be a message of another log's epochs and
// offsets stepped into this one.
func (p *pump) message(m protocol.Message) {
	if m.Log != p.l.net.wire {
		p.l.stats.foreignMessage()
		return
	}
	p.events = append(p.events, shell.Message(m))
}

// add adds request r's event to the round, under a new ID.
func (p *pump) add(r *request) {
	p.nextID++
	r.ev.ID = p.nextID
	p.pending[p.nextID] = r
	p.events = append(p.events, r.ev)
}

// round runs one round of the Node with the events collected (and the
// asynchronous appends due to be tried again).
func (p *pump) round(now time.Time) shell.Output {
	l := p.l
	l.retryDue(p)
	l.node.Persisted(l.persisted.Load())
	out := l.node.Round(now, p.events...)
	l.stats.round(now, p.events, &out)
	clear(p.events)
	p.events = p.events[:0]
	return out
}

// carryOut carries out a round's Output: writes to the writer goroutine,
// messages to the transport, a Status snapshot and a reader wake-up,
// outcomes to the waiting calls, and the gossip leader claim.
func (p *pump) carryOut(out *shell.Output) {
	l := p.l
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
	if out.KeyCheckpoint != nil {
		// On this goroutine, not the writer's: the checkpoint owes no
		// order to the writes (the core checks it against the log at
		// restart), and it is one unsynced file of the live keys.
		if ks, ok := l.store.(storage.KeyCheckpointStore); ok {
			if err := ks.SaveKeyCheckpoint(*out.KeyCheckpoint); err != nil {
				l.logger.Warn("saving the key checkpoint (a restart replays more of the log)", "error", err)
			}
		}
	}
	l.shipOut(out)
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
	p.resolve(out.Resolved)
	if l.net.onCatalog != nil {
		// The catalog once the core knows it (R82), and the HW it is
		// as of whenever that moves: a Node waits on both.
		core := l.node.Replica()
		if hw, ok := core.LogsAsOf(); ok {
			if v := core.LogsVersion(); v != l.logsVersion || hw != l.catalogHW {
				l.net.onCatalog(core.Logs(), hw, v != l.logsVersion)
				l.logsVersion, l.catalogHW = v, hw
			}
		}
	}
	if l.ml != nil && l.net.advertise && out.ClaimChanged {
		l.advertiseLeader(out.Claim.Leader, out.Claim.Epoch)
	}
}

// resolve answers the requests the Node resolved.
func (p *pump) resolve(rs []shell.Resolved) {
	for _, res := range rs {
		r, ok := p.pending[res.ID]
		if !ok {
			continue
		}
		delete(p.pending, res.ID)
		p.l.deliver(r, outcome{offset: res.Offset, err: res.Err})
	}
}

// failed stops the node: the disk refused a write, or the core halted, so
// it stops serving rather than acknowledge anything the disk may not hold.
// Every request is answered with err: those the core took (of unknown
// outcome), those of the round that will not run (they never reached the
// core: nothing was done), the asynchronous appends waiting to be tried
// again, and every later one, until the Log closes.
func (p *pump) failed(err error) {
	l := p.l
	if l.tcp != nil {
		// This log answers nothing from now on, but the node's
		// heartbeats go on: its peers' followers quiesced on it must
		// fetch normally again to notice (R100).
		l.tcp.ResyncAll()
	}
	p.resolve(l.node.Close(err))
	for _, ev := range p.events {
		if !ev.Kind.Resolves() {
			continue
		}
		if r, ok := p.pending[ev.ID]; ok {
			delete(p.pending, ev.ID)
			l.deliver(r, outcome{err: err})
		}
	}
	l.failRetries(err)
	l.publish(l.node.Replica().Status(), l.node.Replica().ReadableHW(), true)
	for {
		select {
		case <-l.closing:
			return
		case r := <-l.requests:
			l.deliver(r, outcome{err: err})
		case <-l.deletes:
			// DeleteBefore sees the failure at its next check.
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
	st := Status{
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
	st.FeatureLevel, st.SupportedLevels = cs.FeatureLevel, cs.SupportedLevels
	l.useJournal(cs.FeatureLevel)
	prev := &l.status // the loop is its only writer
	if prev.NodeID == "" {
		prev = nil // none published yet
	}
	voterView(&st, &cs, prev)
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
	l.statusMu.Lock()
	l.status = st
	l.statusMu.Unlock()
	l.voterIDs = voterIDs(st.Voters, l.voterIDs)
	l.watch.update(Event{Role: st.Role, LeaderID: st.LeaderID, Epoch: st.Epoch, Voters: l.voterIDs}, failed != nil)

	// Readers are bounded by what this node holds durably, not by the HW
	// alone: a leader can see an entry committed by two followers before
	// its own write of it is done. A failure wakes them too, to end.
	l.hwMu.Lock()
	if (wake || failed != nil) && l.hwChanged != nil {
		l.hw = readable
		if l.hwTaken {
			close(l.hwChanged)
			l.hwChanged, l.hwTaken = make(chan struct{}), false
		}
	}
	l.hwMu.Unlock()
}

// statusNow is a copy of the published Status (its slices and maps
// shared: never modified).
func (l *Log) statusNow() Status {
	l.statusMu.Lock()
	defer l.statusMu.Unlock()
	return l.status
}

// hwWait returns the readable HW readers see and the channel the loop
// closes once it moves (nil once the Log is closed), noting that a
// reader holds it.
func (l *Log) hwWait() (uint64, chan struct{}) {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	l.hwTaken = l.hwChanged != nil
	return l.hw, l.hwChanged
}

// journalSwitch is the store's side of useJournal (storage.DirStore).
type journalSwitch interface{ EnableJournal() error }

// useJournal turns the commit journal on once the cluster's finalized
// feature level is protocol.FeatureLevelJournal or above (R68: every node
// supports storage format 2 then, and the level never goes down), unless
// Options.MaxFeatureLevel holds this node below it: a held node keeps the
// way back to the previous release open for its own directory. The
// writer makes the switch between two Applies, off the loop. Once asked,
// never again; from then on Open finds the directory in format 2 and opens
// it with the journal.
func (l *Log) useJournal(level int) {
	if l.journalOn || level < protocol.FeatureLevelJournal {
		return
	}
	if h := l.opts.MaxFeatureLevel; h > 0 && h < protocol.FeatureLevelJournal {
		return
	}
	js, ok := l.store.(journalSwitch)
	if !ok {
		return // a store without a journal (tests' own)
	}
	l.journalOn = true
	l.logger.Info("cluster feature level allows the commit journal; turning it on", "level", level)
	l.writer.switchBetweenApplies(js.EnableJournal)
}
