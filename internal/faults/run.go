package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// RunConfig configures one fault run over a started Cluster.
type RunConfig struct {
	// Duration is how long the nemesis runs (the workload runs through it
	// and through the final heal).
	Duration time.Duration
	// Seed seeds the nemesis and the clients.
	Seed int64
	// Faults restricts the nemesis (nil: all of AllFaults).
	Faults []string
	// NemesisConcurrency is how many faults may be in force at once
	// (default 1).
	NemesisConcurrency int
	// Appenders and Readers are the numbers of concurrent clients.
	Appenders, Readers int
	// AppendTimeout bounds one /append request.
	AppendTimeout time.Duration
	// Retries is how many times an append is retried (same payload) after
	// an unknown or failed outcome, without Idempotent.
	Retries int
	// Idempotent makes every append carry an Idempotency-Key (its
	// payload's id) and retries it with that key, through random nodes,
	// until it is acknowledged or the run stops (Retries is then
	// ignored): the node appends it at most once (R63, R64), so a
	// payload at two offsets is a violation however often it was retried.
	Idempotent bool
	// ConvergeTimeout bounds the wait, after the final heal, for the
	// cluster to accept appends again and for all nodes to agree.
	ConvergeTimeout time.Duration

	// Retention runs (the nodes started with small -segment-bytes and
	// -retention-bytes): DeleteEvery, if positive, makes a deleter POST
	// /delete-before to a random node about that often (0.5x to 1.5x),
	// at random offsets below, around and above its HW; WipeEvery, if
	// positive, has the nemesis wipe an observer that often
	// (Nemesis.WipeEvery). DiskEvery, if positive, samples every node's
	// data directory (segment files, bytes) that often.
	DeleteEvery, WipeEvery, DiskEvery time.Duration
	// WipeVoterEvery, if positive, has the nemesis wipe a voter that
	// often, each after the previous one's replacement committed
	// (Nemesis.WipeVoterEvery).
	WipeVoterEvery time.Duration
	// MinVoterWipes, if positive, is how many voter wipes the run makes
	// at least (Nemesis.MinVoterWipes).
	MinVoterWipes int
	// VoterChanges runs a voter changer beside the appenders: it makes
	// the first observer node a voter (AddVoter through a random node)
	// and removes it again, over and over, and once removes the leader
	// and adds it back, so that the voter set moves between the bootstrap
	// voters and one more while the nemesis runs.
	VoterChanges bool
	// Script, if set, replaces the nemesis's random schedule: it runs
	// until it returns or its context (Duration) ends, then every fault
	// is healed. It drives the faults through nm (leader, kill, restart,
	// the cluster's Pause and Net), recording them as events, so that the
	// figures (Failovers, LeaderFaultGaps) come from the history.
	Script func(ctx context.Context, nm *Nemesis)
	// ReaderLag, if positive, makes a reader pause up to ReaderLag before
	// one session in three: a lagging consumer, which retention overtakes
	// (it is then sent on to the log start).
	ReaderLag time.Duration
	// Logs are named logs the nodes serve (under /logs/NAME/, e.g. the
	// example's -logs) that get a workload of their own beside the
	// default log's: LogAppenders appenders and LogReaders tailing
	// readers each (through random nodes, as the default log's), a
	// history and status samples of their own, and after the final heal
	// their own recovery, convergence and check (Report.Logs). The
	// nemesis faults processes and links, so each fault hits every log;
	// its leader faults aim at the default log's leader.
	Logs                     []string
	LogAppenders, LogReaders int
}

// LogReport is what a run produced for one named log (RunConfig.Logs):
// the same checks as the default log's, on that log's history alone.
type LogReport struct {
	Name        string
	History     *History
	Finals      []FinalLog
	Result      Result
	Converged   bool
	ConvergeErr error
	Recovered   bool
	Reads       int
	Statuses    int
	Outcomes    OutcomeStats
}

// Report is what a run produced.
type Report struct {
	Seed        int64
	Nodes       int
	Observers   int
	Concurrency int
	Duration    time.Duration
	History     *History
	Finals      []FinalLog
	Result      Result
	Nemesis     NemesisStats
	// Converged is false if the nodes did not agree (same HW, same log)
	// within ConvergeTimeout; ConvergeErr says why.
	Converged   bool
	ConvergeErr error
	// Recovered is false if no append was acknowledged after the final
	// heal within ConvergeTimeout.
	Recovered bool
	Failovers []time.Duration
	Reads     int
	Statuses  int
	// Crashes are node exits the harness did not cause.
	Crashes []string
	// Retention figures (zero without retention).
	Retention RetentionStats
	// RollingGaps are the rolling restarts' longest gaps without an
	// acknowledged append, per restart.
	RollingGaps []RollingGap
	// VoterChanges counts the voter changer's requests by what and
	// answer, e.g. "add o1: 200", "remove-leader n2: 200" (VoterChanges
	// runs only).
	VoterChanges map[string]int
	// Outcomes count what became of the appends (acknowledged, unknown by
	// cause, replayed as duplicates).
	Outcomes OutcomeStats
	// Logs are the named logs' reports, in RunConfig.Logs' order.
	Logs []LogReport
}

// OutcomeStats count what became of the appends.
type OutcomeStats struct {
	// UnknownByCause counts the attempts whose outcome was unknown, by
	// Cause* (CauseTimeout: the node's Log gave up when the append's
	// context expired; CauseNodeUnknown: any other unknown outcome the
	// node answered).
	UnknownByCause map[string]int
	// Replayed counts the attempts answered as a duplicate of an earlier
	// one with the same key (with the original's offset).
	Replayed int
	// Payloads counts the logical appends (a payload and its retries);
	// Acked those acknowledged; Abandoned those whose last attempt was
	// not acknowledged when the run stopped.
	Payloads, Acked, Abandoned int
}

// outcomeStats sums up the ops (the harness's own post-heal appends
// included).
func outcomeStats(ops []Op) OutcomeStats {
	st := OutcomeStats{UnknownByCause: map[string]int{}}
	acked := map[string]bool{}
	for _, o := range ops {
		if _, ok := acked[o.Payload]; !ok {
			acked[o.Payload] = false
		}
		switch o.Outcome {
		case OK:
			acked[o.Payload] = true
			if o.Replayed {
				st.Replayed++
			}
		case Unknown:
			cause := o.Cause
			if cause == "" {
				cause = "not-completed"
			}
			st.UnknownByCause[cause]++
		}
	}
	st.Payloads = len(acked)
	for _, a := range acked {
		if a {
			st.Acked++
		} else {
			st.Abandoned++
		}
	}
	return st
}

// RetentionStats are a run's retention figures.
type RetentionStats struct {
	// Deletes counts /delete-before calls by HTTP status (0: no answer).
	Deletes map[int]int
	// Resets counts readers sent on to a log start.
	Resets int
	// AckedDeleted counts acknowledged appends below every node's final
	// log start (gone everywhere, as retention allows), AckedDeletedRead
	// those of them a reader read (the checker compared those reads);
	// AckedChecked those at or above some node's, looked for there.
	AckedDeleted, AckedDeletedRead, AckedChecked int
	// LogStarts are the final log starts by node.
	LogStarts map[string]uint64
	// MaxSegments and MaxBytes are the most segment files and bytes seen
	// in a node's data directory, by node; FinalSegments at the end.
	MaxSegments, FinalSegments map[string]int
	MaxBytes                   map[string]int64
}

// Run drives appenders and tailing readers against c while a nemesis
// injects faults for cfg.Duration, heals everything, waits for the nodes
// to converge, reads every node's final log and checks the history.
func Run(ctx context.Context, c *Cluster, cfg RunConfig) (*Report, error) {
	h := NewHistory()
	acked := make(chan struct{}, 1)
	nm, err := NewNemesis(c, h, cfg.Seed, cfg.Faults, acked)
	if err != nil {
		return nil, err
	}
	nm.Concurrency = cfg.NemesisConcurrency
	nm.WipeEvery = cfg.WipeEvery
	nm.WipeVoterEvery = cfg.WipeVoterEvery
	nm.MinVoterWipes = cfg.MinVoterWipes
	rep := &Report{Seed: cfg.Seed, Nodes: len(c.Voters()), Observers: len(c.Nodes) - len(c.Voters()), Concurrency: max(1, cfg.NemesisConcurrency), History: h}

	stop := make(chan struct{}) // clients: no new operations
	readCtx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	var wg sync.WaitGroup
	for i := 0; i < cfg.Appenders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			appender(ctx, c, h, cfg, i, stop, acked)
		}()
	}
	var rwg sync.WaitGroup
	for i := 0; i < cfg.Readers; i++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			reader(readCtx, c, h, cfg.Seed, i, cfg.ReaderLag)
		}()
	}

	logs := make([]*logRun, len(cfg.Logs))
	for li, name := range cfg.Logs {
		lr := &logRun{name: name, c: c.ForLog(name), h: NewHistory()}
		logs[li] = lr
		// Ids unique across logs, so that a payload names its log's
		// appender; acks of named logs do not feed the nemesis, which
		// waits for the default log's.
		noAck := make(chan struct{}, 1)
		for i := 0; i < cfg.LogAppenders; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				appender(ctx, lr.c, lr.h, cfg, (li+1)*100+i, stop, noAck)
			}()
		}
		for i := 0; i < cfg.LogReaders; i++ {
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				reader(readCtx, lr.c, lr.h, cfg.Seed, (li+1)*100+i, cfg.ReaderLag)
			}()
		}
	}

	var changes *voterChanges
	if cfg.VoterChanges {
		changes = &voterChanges{counts: map[string]int{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			changes.run(ctx, c, h, cfg, stop)
		}()
	}

	if cfg.DeleteEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deleter(ctx, c, h, cfg, stop)
		}()
	}

	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		pollStatuses(pollCtx, c, h)
	}()
	for _, lr := range logs {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			pollStatuses(pollCtx, lr.c, lr.h)
		}()
	}
	disk := newDiskStats()
	if cfg.DiskEvery > 0 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			disk.poll(pollCtx, c, cfg.DiskEvery)
		}()
	}

	nctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	if cfg.Script != nil {
		wctx, stopWatchers := context.WithCancel(context.WithoutCancel(nctx))
		nm.watchCtx = wctx
		cfg.Script(nctx, nm)
		nm.HealAll()
		stopWatchers()
		nm.watchers.Wait()
	} else {
		nm.Run(nctx) // returns after the final heal
	}
	cancel()
	rep.Nemesis = nm.Stats()
	rep.Duration = h.Now()
	close(stop)
	wg.Wait()

	// The cluster must take appends again, then agree.
	deadline := time.Now().Add(cfg.ConvergeTimeout)
	rep.Recovered = recoverAppends(ctx, c, h, cfg, deadline)
	rep.Finals, rep.ConvergeErr = converge(ctx, c, deadline)
	rep.Converged = rep.ConvergeErr == nil
	var lwg sync.WaitGroup
	for _, lr := range logs {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			lr.rep.Recovered = recoverAppends(ctx, lr.c, lr.h, cfg, deadline)
			lr.rep.Finals, lr.rep.ConvergeErr = converge(ctx, lr.c, deadline)
			lr.rep.Converged = lr.rep.ConvergeErr == nil
		}()
	}
	lwg.Wait()
	stopReads()
	rwg.Wait()
	stopPolls()
	pwg.Wait()

	rep.Result = Check(h.Ops, h.Reads, rep.Finals)
	rep.Result.Merge(CheckStatuses(h.Statuses))
	rep.Statuses = len(h.Statuses)
	rep.Failovers = Failovers(h.Ops, h.Events)
	rep.RollingGaps = RollingGaps(h.Ops, h.Events)
	if changes != nil {
		rep.VoterChanges = changes.counts
	}
	rep.Reads = len(h.Reads)
	rep.Outcomes = outcomeStats(h.Ops)
	rep.Crashes = c.Crashes()
	for _, lr := range logs {
		lr.rep.Name, lr.rep.History = lr.name, lr.h
		lr.rep.Result = Check(lr.h.Ops, lr.h.Reads, lr.rep.Finals)
		lr.rep.Result.Merge(CheckStatuses(lr.h.Statuses))
		lr.rep.Reads, lr.rep.Statuses = len(lr.h.Reads), len(lr.h.Statuses)
		lr.rep.Outcomes = outcomeStats(lr.h.Ops)
		rep.Logs = append(rep.Logs, lr.rep)
	}
	if cfg.DeleteEvery > 0 || cfg.WipeEvery > 0 || cfg.DiskEvery > 0 {
		disk.sample(c)
		rep.Retention = retentionStats(h, rep.Finals, disk, c)
	}
	return rep, nil
}

// logRun is one named log's workload in a run.
type logRun struct {
	name string
	c    *Cluster // c.ForLog(name)
	h    *History
	rep  LogReport
}

// Print writes the named log's summary in one line, then its anomalies.
func (l *LogReport) Print(w io.Writer) {
	counts := l.History.Counts()
	fmt.Fprintf(w, "log %s: ops %d (ok=%d failed=%d unknown=%d), appends %d (acked %d, abandoned %d, duplicate answers %d), reads %d, status samples %d, recovered=%v converged=%v",
		l.Name, len(l.History.Ops), counts[OK], counts[Failed], counts[Unknown], l.Outcomes.Payloads, l.Outcomes.Acked,
		l.Outcomes.Abandoned, l.Outcomes.Replayed, l.Reads, l.Statuses, l.Recovered, l.Converged)
	if l.ConvergeErr != nil {
		fmt.Fprintf(w, " (%v)", l.ConvergeErr)
	}
	if len(l.Finals) > 0 {
		fmt.Fprintf(w, " final hw=%d entries=%d", l.Finals[0].HW, len(l.Finals[0].Entries))
	}
	fmt.Fprintf(w, ", violations %d\n", l.Result.Violations())
	if !l.Result.OK() {
		l.Result.Print(w, 5)
	}
}

// diskStats records the largest data directories seen.
type diskStats struct {
	mu                   sync.Mutex
	maxSegments, segment map[string]int
	maxBytes             map[string]int64
}

func newDiskStats() *diskStats {
	return &diskStats{maxSegments: map[string]int{}, segment: map[string]int{}, maxBytes: map[string]int64{}}
}

func (d *diskStats) sample(c *Cluster) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range c.Nodes {
		segs, bytes := n.DiskUsage()
		d.segment[n.ID] = segs
		d.maxSegments[n.ID] = max(d.maxSegments[n.ID], segs)
		d.maxBytes[n.ID] = max(d.maxBytes[n.ID], bytes)
	}
}

func (d *diskStats) poll(ctx context.Context, c *Cluster, every time.Duration) {
	for ctx.Err() == nil {
		d.sample(c)
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// retentionStats sums up a retention run.
func retentionStats(h *History, finals []FinalLog, disk *diskStats, c *Cluster) RetentionStats {
	rs := RetentionStats{Deletes: map[int]int{}, LogStarts: map[string]uint64{}}
	for _, d := range h.Deletes {
		rs.Deletes[d.Code]++
	}
	read := map[uint64]bool{}
	for _, r := range h.Reads {
		if r.Reset {
			rs.Resets++
		} else {
			read[r.Offset] = true
		}
	}
	minStart, maxStart := uint64(0), uint64(0)
	for i, f := range finals {
		rs.LogStarts[f.Node] = f.LogStart
		if i == 0 || f.LogStart < minStart {
			minStart = f.LogStart
		}
		maxStart = max(maxStart, f.LogStart)
	}
	for _, o := range h.Ops {
		if o.Outcome != OK {
			continue
		}
		if len(finals) > 0 && o.Offset < minStart {
			rs.AckedDeleted++
			if read[o.Offset] {
				rs.AckedDeletedRead++
			}
		} else {
			rs.AckedChecked++
		}
	}
	disk.mu.Lock()
	defer disk.mu.Unlock()
	rs.MaxSegments, rs.MaxBytes, rs.FinalSegments = disk.maxSegments, disk.maxBytes, disk.segment
	return rs
}

// appender appends unique payloads through random nodes until stop, each
// retried (same payload, any node) after an unknown or failed outcome:
// cfg.Retries times, or, with cfg.Idempotent, with the same
// Idempotency-Key until acknowledged.
func appender(ctx context.Context, c *Cluster, h *History, cfg RunConfig, id int, stop <-chan struct{}, acked chan<- struct{}) {
	rng := rand.New(rand.NewSource(cfg.Seed*1000 + int64(id) + 1))
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		payload := fmt.Sprintf("a%d-%d", id, seq)
		record := EncodePayload(payload, payloadSize(rng))
		key := ""
		if cfg.Idempotent {
			key = payload
		}
		for attempt := 0; cfg.Idempotent || attempt <= cfg.Retries; attempt++ {
			n := c.Nodes[rng.Intn(len(c.Nodes))]
			opID := h.InvokeKey(id, n.ID, payload, key, attempt)
			actx, cancel := context.WithTimeout(ctx, cfg.AppendTimeout)
			res := c.AppendKey(actx, n, record, key)
			cancel()
			h.CompleteAppend(opID, res)
			if res.Outcome == OK {
				select {
				case acked <- struct{}{}:
				default:
				}
				break
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+rng.Intn(100)) * time.Millisecond):
			}
		}
		time.Sleep(time.Duration(rng.Intn(5)) * time.Millisecond)
	}
}

// payloadSize draws a filler size: mostly tiny, sometimes kilobytes, now
// and then a few hundred kilobytes (several such fill a fetch response's
// byte limit, default 1 MiB, so responses get split).
func payloadSize(rng *rand.Rand) int {
	switch x := rng.Intn(1000); {
	case x < 900:
		return rng.Intn(64)
	case x < 995:
		return 1024 + rng.Intn(8*1024)
	default:
		return 64*1024 + rng.Intn(320*1024)
	}
}

// voterChanges is the voter changer of a VoterChanges run.
type voterChanges struct {
	mu     sync.Mutex
	counts map[string]int
}

// run makes the first observer a voter and removes it again until stop,
// each change through a random node and retried until it is answered 200
// (or, for a remove, 404: a remove whose answer was lost may have been
// made). Once, while the observer is a voter, it removes the leader and
// adds it back. The voter count moves between the bootstrap voters and
// one more, so a majority of the bootstrap voters stays a majority.
func (vc *voterChanges) run(ctx context.Context, c *Cluster, h *History, cfg RunConfig, stop <-chan struct{}) {
	var spare *Node
	for _, n := range c.Nodes {
		if n.Observer {
			spare = n
			break
		}
	}
	if spare == nil {
		return
	}
	rng := rand.New(rand.NewSource(cfg.Seed*1000 + 950))
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	// change retries one change until it is made or stop.
	change := func(what string, add bool, id string) bool {
		for !stopped() {
			via := c.Nodes[rng.Intn(len(c.Nodes))]
			h.AddEvent(Event{Kind: "voter-" + what, Nodes: []string{id}, Detail: "via " + via.ID})
			cctx, cancel := context.WithTimeout(ctx, 35*time.Second)
			code, msg := c.ChangeVoter(cctx, via, add, id)
			cancel()
			vc.mu.Lock()
			vc.counts[fmt.Sprintf("%s %s: %d", what, id, code)]++
			vc.mu.Unlock()
			detail := fmt.Sprintf("via %s: %d %s", via.ID, code, msg)
			if code == http.StatusOK || !add && code == http.StatusNotFound {
				h.AddEvent(Event{Kind: "voter-" + what + "-done", Nodes: []string{id}, Detail: detail})
				return true
			}
			h.AddEvent(Event{Kind: "voter-" + what + "-failed", Nodes: []string{id}, Detail: detail})
			select {
			case <-stop:
			case <-time.After(time.Duration(200+rng.Intn(800)) * time.Millisecond):
			}
		}
		return false
	}
	leaderRemoved := false
	for !stopped() {
		if !change("add", true, spare.ID) {
			return
		}
		if !leaderRemoved {
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			leader, _ := c.Leader(lctx)
			cancel()
			if leader != nil && leader != spare {
				leaderRemoved = true
				if !change("remove-leader", false, leader.ID) || !change("add", true, leader.ID) {
					return
				}
			}
		}
		if !change("remove", false, spare.ID) {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(500+rng.Intn(1500)) * time.Millisecond):
		}
	}
}

// deleter asks random nodes to delete before random offsets until stop:
// mostly inside the node's retained log (up to half of it), sometimes
// above its HW (the node must stop at the HW), sometimes at or below its
// log start (nothing to do).
func deleter(ctx context.Context, c *Cluster, h *History, cfg RunConfig, stop <-chan struct{}) {
	rng := rand.New(rand.NewSource(cfg.Seed*1000 + 900))
	for {
		wait := cfg.DeleteEvery/2 + time.Duration(rng.Int63n(int64(cfg.DeleteEvery)))
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		n := c.Nodes[rng.Intn(len(c.Nodes))]
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Status(sctx, n)
		cancel()
		if err != nil {
			continue // down or paused
		}
		var offset uint64
		switch x := rng.Intn(10); {
		case x < 6 && st.HW > st.LogStart:
			offset = st.LogStart + 1 + uint64(rng.Int63n(int64(st.HW-st.LogStart+1)/2+1))
		case x < 8:
			offset = st.HW + 1 + uint64(rng.Intn(1000))
		default:
			offset = uint64(rng.Int63n(int64(st.LogStart) + 1))
		}
		invoke := h.Now()
		dctx, cancel := context.WithTimeout(ctx, cfg.AppendTimeout)
		d := c.DeleteBefore(dctx, n, offset)
		cancel()
		d.Invoke = invoke
		h.AddDelete(d)
	}
}

// reader tails random nodes' /entries (follow=true) in sessions of a few
// seconds, each resuming right after the last offset it saw, until ctx
// ends. Sent below a node's log start, it resumes from that log start
// (recorded as a Reset read).
func reader(ctx context.Context, c *Cluster, h *History, seed int64, id int, lag time.Duration) {
	rng := rand.New(rand.NewSource(seed*1000 + 500 + int64(id)))
	var next uint64
	for session := 0; ctx.Err() == nil; session++ {
		if lag > 0 && rng.Intn(3) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(rng.Int63n(int64(lag)))):
			}
		}
		n := c.Nodes[rng.Intn(len(c.Nodes))]
		sctx, cancel := context.WithTimeout(ctx, time.Duration(500+rng.Intn(4500))*time.Millisecond)
		err := c.Entries(sctx, n, next, true, func(e LogEntry) error {
			h.AddRead(Read{Reader: id, Session: session, Node: n.ID, Offset: e.Offset, Payload: e.Payload})
			next = max(next, e.Offset+1)
			return nil
		})
		cancel()
		var oor *OutOfRangeError
		if errors.As(err, &oor) {
			h.AddRead(Read{Reader: id, Session: session, Node: n.ID, Reset: true, From: next, Offset: oor.LogStart})
			next = max(next, oor.LogStart)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil && sctx.Err() == nil {
			time.Sleep(50 * time.Millisecond) // node down or paused: try another
		}
	}
}

// pollStatuses samples every running, unpaused node's /status every
// 100ms until ctx ends. A sample is kept only if the node's incarnation
// was the same before and after the request, so that it is attributed to
// the right process.
func pollStatuses(ctx context.Context, c *Cluster, h *History) {
	for ctx.Err() == nil {
		for _, n := range c.Nodes {
			if !n.Running() || n.Paused() {
				continue
			}
			inc, wipes := n.Incarnation(), n.Wipes()
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			st, err := c.Status(sctx, n)
			cancel()
			if err != nil || n.Incarnation() != inc || n.Wipes() != wipes {
				continue
			}
			h.AddStatus(StatusSample{Node: n.ID, Incarnation: inc, Wipes: wipes, Role: st.Role, Epoch: st.Epoch,
				LeaderID: st.LeaderID, LEO: st.LEO, HW: st.HW, LogStart: st.LogStart})
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recoverAppends appends through each node in turn until one append is
// acknowledged (the cluster is available again and the new leader has
// committed an entry of its epoch) or the deadline passes.
func recoverAppends(ctx context.Context, c *Cluster, h *History, cfg RunConfig, deadline time.Time) bool {
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		n := c.Nodes[i%len(c.Nodes)]
		payload := fmt.Sprintf("final-%d", i)
		opID := h.Invoke(-1, n.ID, payload, 0)
		actx, cancel := context.WithTimeout(ctx, cfg.AppendTimeout)
		out, off, msg := c.Append(actx, n, EncodePayload(payload, 0))
		cancel()
		h.Complete(opID, out, off, msg)
		if out == OK {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// converge polls until every node reports the same HW and LEO and serves
// the same final log, or the deadline passes; it returns the last final
// logs read either way.
func converge(ctx context.Context, c *Cluster, deadline time.Time) ([]FinalLog, error) {
	var finals []FinalLog
	var why error
	for {
		finals, why = snapshot(ctx, c)
		if why == nil {
			return finals, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if len(finals) < len(c.Nodes) {
				finals = bestEffortLogs(ctx, c)
			}
			return finals, fmt.Errorf("not converged by the deadline: %w", why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func snapshot(ctx context.Context, c *Cluster) ([]FinalLog, error) {
	var sts []Status
	for _, n := range c.Nodes {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(sctx, n)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s status: %w", n.ID, err)
		}
		sts = append(sts, st)
	}
	for _, st := range sts[1:] {
		if st.HW != sts[0].HW || st.LEO != sts[0].LEO {
			return nil, fmt.Errorf("%s hw=%d leo=%d vs %s hw=%d leo=%d", sts[0].NodeID, sts[0].HW, sts[0].LEO, st.NodeID, st.HW, st.LEO)
		}
		// The voter set converges too: every node must agree on the voters
		// in force.
		if st.votersKey() != sts[0].votersKey() {
			return nil, fmt.Errorf("voters in force: %s has %s, %s has %s", sts[0].NodeID, sts[0].votersKey(), st.NodeID, st.votersKey())
		}
	}
	// Every voter is the incarnation running now: a wiped voter was
	// replaced at its new directory.
	dirOf := map[string]string{}
	for _, st := range sts {
		dirOf[st.NodeID] = st.DirectoryID
	}
	for _, v := range sts[0].Voters {
		if d, ok := dirOf[v.ID]; ok && v.DirectoryID != "" && d != "" && v.DirectoryID != d {
			return nil, fmt.Errorf("voter %s is recorded at directory %s, but it runs on %s (%s)", v.ID, v.DirectoryID, d, sts[0].votersKey())
		}
	}
	var finals []FinalLog
	for _, n := range c.Nodes {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		f, err := c.FinalLog(fctx, n)
		cancel()
		if err != nil {
			return finals, fmt.Errorf("%s entries: %w", n.ID, err)
		}
		finals = append(finals, f)
	}
	for _, f := range finals[1:] {
		a := nodeLog{node: finals[0].Node, hw: finals[0].HW, start: finals[0].LogStart, at: index(finals[0])}
		b := nodeLog{node: f.Node, hw: f.HW, start: f.LogStart, at: index(f)}
		if d := diffLogs(a, b); d != "" {
			return finals, fmt.Errorf("%s vs %s: %s", a.node, b.node, d)
		}
	}
	return finals, nil
}

// bestEffortLogs reads the final log of every node that answers, so that a
// run that did not converge is still checked on what the nodes hold.
func bestEffortLogs(ctx context.Context, c *Cluster) []FinalLog {
	var finals []FinalLog
	for _, n := range c.Nodes {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		f, err := c.FinalLog(fctx, n)
		cancel()
		if err == nil {
			finals = append(finals, f)
		}
	}
	return finals
}

func index(f FinalLog) map[uint64]LogEntry {
	m := make(map[uint64]LogEntry, len(f.Entries))
	for _, e := range f.Entries {
		m[e.Offset] = e
	}
	return m
}

// Print writes the run's summary.
func (r *Report) Print(w io.Writer) {
	counts := r.History.Counts()
	fmt.Fprintf(w, "seed=%d voters=%d observers=%d nemesis+heal=%v concurrency=%d\n", r.Seed, r.Nodes, r.Observers, r.Duration.Round(time.Millisecond), r.Concurrency)
	fmt.Fprintf(w, "ops: %d (ok=%d failed=%d unknown=%d), reads: %d, status samples: %d\n",
		len(r.History.Ops), counts[OK], counts[Failed], counts[Unknown], r.Reads, r.Statuses)
	oc := r.Outcomes
	fmt.Fprintf(w, "appends: %d (acked %d, abandoned when the run stopped %d), answered as a duplicate %d; unknown outcomes by cause: %v\n",
		oc.Payloads, oc.Acked, oc.Abandoned, oc.Replayed, oc.UnknownByCause)
	fmt.Fprintf(w, "nemesis: kills=%d pauses=%d partitions=%d slow-links=%d wipes=%d per-fault=%v\n",
		r.Nemesis.Kills, r.Nemesis.Pauses, r.Nemesis.Partitions, r.Nemesis.Slows, r.Nemesis.Wipes, r.Nemesis.PerFault)
	el := r.Nemesis.Elections
	fmt.Fprintf(w, "failover: leader kill -> new leader n=%d median=%v max=%v; -> next ack of an append invoked after the kill n=%d median=%v max=%v\n",
		len(el), Percentile(el, 0.5).Round(time.Millisecond), Percentile(el, 1).Round(time.Millisecond),
		len(r.Failovers), Percentile(r.Failovers, 0.5).Round(time.Millisecond), Percentile(r.Failovers, 1).Round(time.Millisecond))
	if n := r.Nemesis; n.VoterWipes > 0 {
		fmt.Fprintf(w, "voter wipes: %d, replaced (restart -> committed at the new directory) n=%d median=%v max=%v, not replaced %d\n",
			n.VoterWipes, len(n.Replacements), Percentile(n.Replacements, 0.5).Round(time.Millisecond),
			Percentile(n.Replacements, 1).Round(time.Millisecond), len(n.ReplaceFailures))
	}
	if len(r.RollingGaps) > 0 {
		var gs []string
		for _, g := range r.RollingGaps {
			l := ""
			if g.Leader {
				l = "(leader)"
			}
			gs = append(gs, fmt.Sprintf("%s%s %v", g.Node, l, g.Gap.Round(time.Millisecond)))
		}
		fmt.Fprintf(w, "rolling restarts: longest gap without an ack per restart: %s\n", strings.Join(gs, ", "))
	}
	if len(r.VoterChanges) > 0 {
		fmt.Fprintf(w, "voter changes (what node: HTTP status): %v\n", r.VoterChanges)
	}
	fmt.Fprintf(w, "recovered=%v converged=%v", r.Recovered, r.Converged)
	if r.ConvergeErr != nil {
		fmt.Fprintf(w, " (%v)", r.ConvergeErr)
	}
	if len(r.Finals) > 0 {
		fmt.Fprintf(w, " final hw=%d entries=%d", r.Finals[0].HW, len(r.Finals[0].Entries))
	}
	fmt.Fprintln(w)
	if rs := r.Retention; rs.LogStarts != nil {
		fmt.Fprintf(w, "retention: delete-before calls by HTTP status %v, reader resets %d, acked entries deleted everywhere %d (%d of them read), checked in the final logs %d, final log starts %v\n",
			rs.Deletes, rs.Resets, rs.AckedDeleted, rs.AckedDeletedRead, rs.AckedChecked, rs.LogStarts)
		fmt.Fprintf(w, "retention: segment files max %v final %v, data directory max bytes %v\n", rs.MaxSegments, rs.FinalSegments, rs.MaxBytes)
	}
	fmt.Fprintf(w, "node crashes (exits not caused by the nemesis): %d\n", len(r.Crashes))
	for _, c := range r.Crashes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	r.Result.Print(w, 5)
	for i := range r.Logs {
		r.Logs[i].Print(w)
	}
}

// Dump writes the whole history (events, ops, anomalies; reads are
// summarized per reader) to path, for post-mortems.
func (r *Report) Dump(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	r.Print(w)
	fmt.Fprintln(w, "\n== nemesis events")
	for _, e := range r.History.Events {
		fmt.Fprintln(w, e)
	}
	fmt.Fprintln(w, "\n== anomalies")
	for _, a := range r.Result.Anomalies {
		fmt.Fprintln(w, a)
	}
	fmt.Fprintln(w, "\n== ops")
	for _, o := range r.History.Ops {
		fmt.Fprintln(w, o)
	}
	fmt.Fprintln(w, "\n== delete-before calls")
	for _, d := range r.History.Deletes {
		fmt.Fprintln(w, d)
	}
	fmt.Fprintln(w, "\n== status samples")
	for _, st := range r.History.Statuses {
		fmt.Fprintln(w, st)
	}
	fmt.Fprintln(w, "\n== reads")
	for _, rd := range r.History.Reads {
		fmt.Fprintln(w, rd)
	}
	for _, fl := range r.Finals {
		fmt.Fprintf(w, "\n== final log of %s (log start %d, hw=%d, %d entries)\n", fl.Node, fl.LogStart, fl.HW, len(fl.Entries))
		for _, e := range fl.Entries {
			fmt.Fprintf(w, "%d e%d %q\n", e.Offset, e.Epoch, e.Payload)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Summary is a run's figures in one flat record (one JSON line per run in
// a results file).
type Summary struct {
	Time        string         `json:"time"`
	Seed        int64          `json:"seed"`
	Nodes       int            `json:"nodes"`
	Observers   int            `json:"observers,omitempty"`
	Concurrency int            `json:"concurrency"`
	Pkg         string         `json:"pkg,omitempty"`
	Args        []string       `json:"args,omitempty"`
	Tags        string         `json:"tags,omitempty"`
	Revision    string         `json:"revision,omitempty"`
	Seconds     float64        `json:"seconds"`
	OK          int            `json:"ok"`
	Failed      int            `json:"failed"`
	Unknown     int            `json:"unknown"`
	Reads       int            `json:"reads"`
	Kills       int            `json:"kills"`
	Pauses      int            `json:"pauses"`
	Partitions  int            `json:"partitions"`
	Slows       int            `json:"slows"`
	Anomalies   map[string]int `json:"anomalies"`
	Violations  int            `json:"violations"`
	Converged   bool           `json:"converged"`
	Crashes     int            `json:"crashes"`
	// Failover figures in milliseconds.
	ElectionMedianMS int64 `json:"election_median_ms"`
	ElectionMaxMS    int64 `json:"election_max_ms"`
	AckMedianMS      int64 `json:"ack_median_ms"`
	AckMaxMS         int64 `json:"ack_max_ms"`
	// Retention runs: observers wiped, delete-before calls answered 200,
	// reader resets, acknowledged appends deleted everywhere by the end.
	Wipes        int `json:"wipes,omitempty"`
	DeletesOK    int `json:"deletes_ok,omitempty"`
	Resets       int `json:"resets,omitempty"`
	AckedDeleted int `json:"acked_deleted,omitempty"`
	// Membership runs: voters wiped, their replacement times (restart to
	// committed at the new directory) and the rolling restarts' gaps, in
	// milliseconds.
	VoterWipes    int     `json:"voter_wipes,omitempty"`
	ReplaceMS     []int64 `json:"replace_ms,omitempty"`
	RollingGapsMS []int64 `json:"rolling_gaps_ms,omitempty"`
	ReplaceFailed int     `json:"replace_failed,omitempty"`
	// Exactly once: unknown outcomes by cause, attempts answered as
	// duplicates, logical appends abandoned when the run stopped, and the
	// payloads found at two offsets (anomalies duplicate and
	// duplicate-retried).
	UnknownByCause map[string]int `json:"unknown_by_cause,omitempty"`
	Replayed       int            `json:"replayed,omitempty"`
	Abandoned      int            `json:"abandoned,omitempty"`
	Duplicates     int            `json:"duplicates"`
}

// Summarize returns the run's figures.
func (r *Report) Summarize(tags string) Summary {
	c := r.History.Counts()
	el := r.Nemesis.Elections
	var replace, gaps []int64
	for _, d := range r.Nemesis.Replacements {
		replace = append(replace, d.Milliseconds())
	}
	for _, g := range r.RollingGaps {
		gaps = append(gaps, g.Gap.Milliseconds())
	}
	return Summary{
		VoterWipes: r.Nemesis.VoterWipes, ReplaceMS: replace, RollingGapsMS: gaps, ReplaceFailed: len(r.Nemesis.ReplaceFailures),
		Time: time.Now().UTC().Format(time.RFC3339), Seed: r.Seed, Nodes: r.Nodes, Observers: r.Observers, Concurrency: r.Concurrency,
		Tags: tags, Seconds: r.Duration.Seconds(), OK: c[OK], Failed: c[Failed], Unknown: c[Unknown],
		Reads: r.Reads, Kills: r.Nemesis.Kills, Pauses: r.Nemesis.Pauses, Partitions: r.Nemesis.Partitions,
		Slows: r.Nemesis.Slows, Wipes: r.Nemesis.Wipes, DeletesOK: r.Retention.Deletes[200], Resets: r.Retention.Resets,
		AckedDeleted: r.Retention.AckedDeleted, Anomalies: r.Result.Counts, Violations: r.Result.Violations(),
		Converged: r.Converged, Crashes: len(r.Crashes),
		ElectionMedianMS: Percentile(el, 0.5).Milliseconds(), ElectionMaxMS: Percentile(el, 1).Milliseconds(),
		AckMedianMS: Percentile(r.Failovers, 0.5).Milliseconds(), AckMaxMS: Percentile(r.Failovers, 1).Milliseconds(),
		UnknownByCause: r.Outcomes.UnknownByCause, Replayed: r.Outcomes.Replayed, Abandoned: r.Outcomes.Abandoned,
		Duplicates: r.Result.Counts[Duplicate] + r.Result.Counts[DuplicateRetried],
	}
}
