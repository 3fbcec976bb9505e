package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"
)

// Fault names the nemesis's actions.
const (
	// FaultKill SIGKILLs a random node, restarts it on the same directory.
	FaultKill = "kill"
	// FaultKillLeader SIGKILLs the leader, restarts it.
	FaultKillLeader = "kill-leader"
	// FaultKillAfterAck SIGKILLs the leader right after the next
	// acknowledged append (a window where the ack may have outrun the
	// replication).
	FaultKillAfterAck = "kill-after-ack"
	// FaultCrashMajority isolates a minority, lets appends commit on the
	// rest, then SIGKILLs the leader and the rest of the majority at once,
	// restarts the followers at once, heals the minority, and restarts the
	// old leader last: a new leader must be elected among nodes that all
	// just restarted (KIP-101's scenario).
	FaultCrashMajority = "crash-majority"
	// FaultIsolateKillLeader cuts the leader off from all others, holds,
	// SIGKILLs it while still cut off, heals, restarts it: a zombie leader
	// that must not have acknowledged anything it could not commit, and
	// that must truncate its uncommitted suffix when it rejoins.
	FaultIsolateKillLeader = "isolate-kill-leader"
	// FaultCrashAll SIGKILLs every node at once and restarts them all: the
	// whole cluster recovers from its disks.
	FaultCrashAll = "crash-all"
	// FaultFlap kills a node (often the leader) several times in quick
	// succession, each time shortly after it came back: recovery itself is
	// interrupted.
	FaultFlap = "flap"
	// FaultPause SIGSTOPs a random node or the leader, then SIGCONTs it.
	FaultPause = "pause"
	// FaultIsolate partitions one node (often the leader) from all others.
	FaultIsolate = "isolate"
	// FaultSplit partitions the nodes into a random majority and minority.
	FaultSplit = "split"
	// FaultBridge (5+ nodes) splits the others into two halves that only
	// one bridge node sees both of.
	FaultBridge = "bridge"
	// FaultSlow delays every byte to and from a node (often the leader) by
	// 50ms..1.5s, sometimes beyond the fetch timeout.
	FaultSlow = "slow"
	// FaultOneWay blocks one direction only: a node's outgoing or incoming
	// links, or a single link.
	FaultOneWay = "one-way"
	// FaultWipeObserver SIGKILLs an observer, deletes its data directory
	// and starts it again empty: it must catch up from the leader's log
	// start (R53).
	FaultWipeObserver = "wipe-observer"
	// FaultWipeVoter SIGKILLs a voter, deletes its data directory and
	// starts it again empty (same ID and flags): it comes back as an
	// observer and must become a voter again at its new directory by
	// itself (automatic replacement, R58). The fault lasts until the
	// leader's committed voter set names the new directory (bounded by
	// ReplaceTimeout), so that at most one voter is without its disk at a
	// time; then the wiped node's whole log is read (Read.Reader
	// WipeReaderBase+k) for the checker.
	FaultWipeVoter = "wipe-voter"
	// FaultWipeCrashLeader is the scenario in which a wiped voter that
	// voted as its old self would lose acknowledged appends (3 voters): one
	// follower paused, appends acknowledged by the leader and the other
	// follower, that one wiped, the leader SIGKILLed, the paused one
	// resumed, the leader restarted seconds later; then as FaultWipeVoter
	// (the wiped voter must be replaced). A wiped voter voting as its old
	// self (-faults.tags=replog_bug_wiped_voter) loses those appends.
	FaultWipeCrashLeader = "wipe-crash-leader"
	// FaultRollingRestart restarts every voter in turn with SIGTERM (a
	// leader hands its leadership over in Close, R59) and a start on the
	// same directory, each once the previous one is back and caught up;
	// its "terminate" and "rejoined" events bound the append gaps
	// (RollingGaps).
	FaultRollingRestart = "rolling-restart"
)

// WipeReaderBase numbers the reads of a wiped voter's log taken once it
// is a voter again (reader WipeReaderBase+k after the k-th wipe), apart
// from the tailing readers'.
const WipeReaderBase = 1000

// ReplaceTimeout bounds FaultWipeVoter's wait for the replacement.
const ReplaceTimeout = 90 * time.Second

// AllFaults lists every fault with its weight in the random schedule.
var AllFaults = map[string]int{
	FaultKill: 2, FaultKillLeader: 2, FaultKillAfterAck: 2, FaultCrashMajority: 1, FaultIsolateKillLeader: 1, FaultCrashAll: 1, FaultFlap: 1,
	FaultPause: 2, FaultIsolate: 2, FaultSplit: 1, FaultBridge: 1, FaultOneWay: 2, FaultSlow: 1,
	FaultWipeObserver: 1, FaultWipeVoter: 1, FaultWipeCrashLeader: 1, FaultRollingRestart: 1,
}

// ProcessFaults are the faults that do not partition the network (for runs
// with unproxied gossip).
var ProcessFaults = []string{FaultKill, FaultKillLeader, FaultKillAfterAck, FaultCrashAll, FaultFlap, FaultPause, FaultWipeVoter, FaultWipeCrashLeader, FaultRollingRestart}

// NemesisStats counts what the nemesis did.
type NemesisStats struct {
	Kills, Pauses, Partitions, Slows int
	// Wipes counts observers wiped and restarted empty.
	Wipes int
	// VoterWipes counts voters wiped and restarted empty; Replacements
	// are, per such wipe, the time from the new process serving HTTP to
	// the leader's committed voter set naming its new directory;
	// ReplaceFailures describe wipes not replaced within ReplaceTimeout.
	VoterWipes      int
	Replacements    []time.Duration
	ReplaceFailures []string
	// RollingRestarts counts the nodes restarted by FaultRollingRestart.
	RollingRestarts int
	// Elections are the times from each kill of the leader to a node
	// reporting itself leader of a later epoch (polled every 50ms).
	Elections []time.Duration
	// PerFault counts actions per fault name.
	PerFault map[string]int
}

// Nemesis injects faults into a Cluster on a seeded random schedule, one
// action at a time: apply, hold, undo, rest.
type Nemesis struct {
	c      *Cluster
	h      *History
	rng    *rand.Rand
	faults []string
	weight []int
	acked  <-chan struct{}
	logf   func(string, ...any)
	// Hold and Rest bound how long a fault lasts and the quiet between
	// faults.
	HoldMin, HoldMax, RestMin, RestMax time.Duration

	// Concurrency is how many fault workers run at once (default 1);
	// with more, faults overlap (a heal by one heals all partitions).
	Concurrency int
	// WipeEvery, if positive, wipes a random observer every WipeEvery
	// besides the random faults (FaultWipeObserver), so that a run has
	// wipes whatever its schedule draws.
	WipeEvery time.Duration
	// WipeVoterEvery, if positive, wipes a voter (FaultWipeVoter) every
	// WipeVoterEvery after the previous wipe's replacement, besides the
	// random faults.
	WipeVoterEvery time.Duration
	// MinVoterWipes, if positive, is how many voter wipes a run makes at
	// least: if the schedule's other faults held them back (leaders killed
	// and paused one after another delay a replacement, and the next wipe
	// waits for it), more are made after the schedule ends, with every
	// node healed and no other fault, each waited for as any wipe is.
	MinVoterWipes int

	rngMu sync.Mutex
	// voterMu is held by a voter wipe (until its replacement commits) and
	// by a rolling restart: never two voters without their disk, nor a
	// wipe in the middle of a rolling restart.
	voterMu sync.Mutex
	mu      sync.Mutex // guards stats and leaderEpoch
	stats   NemesisStats
	// leaderEpoch is the epoch of the leader last found by leader().
	leaderEpoch uint64
	watchers    sync.WaitGroup
	watchCtx    context.Context
}

// NewNemesis returns a nemesis over c drawing from faults (names from
// AllFaults; nil means all) with seed. acked receives a value after each
// acknowledged append (non-blocking sends; used by FaultKillAfterAck).
func NewNemesis(c *Cluster, h *History, seed int64, faults []string, acked <-chan struct{}) (*Nemesis, error) {
	if len(faults) == 0 {
		for f := range AllFaults {
			faults = append(faults, f)
		}
	}
	sort.Strings(faults)
	nm := &Nemesis{c: c, h: h, rng: rand.New(rand.NewSource(seed)), acked: acked, logf: c.logf,
		HoldMin: time.Second, HoldMax: 4 * time.Second, RestMin: 500 * time.Millisecond, RestMax: 2 * time.Second,
		stats: NemesisStats{PerFault: map[string]int{}}}
	for _, f := range faults {
		w, ok := AllFaults[f]
		if !ok {
			return nil, fmt.Errorf("unknown fault %q", f)
		}
		if f == FaultBridge && len(c.Nodes) < 5 || f == FaultWipeObserver && len(c.Voters()) == len(c.Nodes) {
			continue
		}
		nm.faults = append(nm.faults, f)
		nm.weight = append(nm.weight, w)
	}
	if len(nm.faults) == 0 {
		return nil, fmt.Errorf("no usable fault in %v", faults)
	}
	return nm, nil
}

// Stats returns the counts (call after Run returns).
func (nm *Nemesis) Stats() NemesisStats {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	st := nm.stats
	st.Elections = append([]time.Duration(nil), st.Elections...)
	st.Replacements = append([]time.Duration(nil), st.Replacements...)
	st.ReplaceFailures = append([]string(nil), st.ReplaceFailures...)
	return st
}

// Run injects faults until ctx ends, then heals everything: network
// healed, paused nodes resumed, dead nodes restarted.
func (nm *Nemesis) Run(ctx context.Context) {
	// Election watchers end with the run (after the final heal).
	wctx, stopWatchers := context.WithCancel(context.WithoutCancel(ctx))
	nm.watchCtx = wctx
	defer nm.watchers.Wait()
	defer stopWatchers()
	defer nm.HealAll()
	var wg sync.WaitGroup
	if nm.WipeEvery > 0 && len(nm.c.Voters()) < len(nm.c.Nodes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for nm.sleep(ctx, nm.WipeEvery); ctx.Err() == nil; nm.sleep(ctx, nm.WipeEvery) {
				nm.mu.Lock()
				nm.stats.PerFault[FaultWipeObserver]++
				nm.mu.Unlock()
				nm.do(ctx, FaultWipeObserver)
			}
		}()
	}
	if nm.WipeVoterEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for nm.sleep(ctx, nm.WipeVoterEvery); ctx.Err() == nil; nm.sleep(ctx, nm.WipeVoterEvery) {
				nm.mu.Lock()
				nm.stats.PerFault[FaultWipeVoter]++
				nm.mu.Unlock()
				// A wipe refused for the moment (no committed set of three
				// running voters: a leader just killed or paused) is tried
				// again shortly and quietly, so that how many wipes a run
				// makes does not hang on landing between the schedule's
				// other faults (a CI run once made one in 20 s).
				for quiet := false; !nm.wipeVoter(ctx, false, quiet) && ctx.Err() == nil; quiet = true {
					nm.sleep(ctx, 250*time.Millisecond)
				}
			}
		}()
	}
	for i := 0; i < max(1, nm.Concurrency); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				nm.sleep(ctx, nm.between(nm.RestMin, nm.RestMax))
			}
			for ctx.Err() == nil {
				f := nm.pick()
				nm.mu.Lock()
				nm.stats.PerFault[f]++
				nm.mu.Unlock()
				nm.do(ctx, f)
				nm.sleep(ctx, nm.between(nm.RestMin, nm.RestMax))
			}
		}()
	}
	wg.Wait()
	nm.wipeUpToMin(ctx)
}

// wipeUpToMin makes the run's voter wipes reach MinVoterWipes once the
// schedule has ended: everything healed first, then wipes tried until
// enough were made, within ReplaceTimeout each.
func (nm *Nemesis) wipeUpToMin(ctx context.Context) {
	wipes := func() int {
		nm.mu.Lock()
		defer nm.mu.Unlock()
		return nm.stats.VoterWipes
	}
	if nm.MinVoterWipes <= 0 || wipes() >= nm.MinVoterWipes {
		return
	}
	nm.logf("nemesis: %d voter wipes in the schedule, %d wanted: wiping more after it", wipes(), nm.MinVoterWipes)
	nm.HealAll()
	xctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(nm.MinVoterWipes)*ReplaceTimeout)
	defer cancel()
	for wipes() < nm.MinVoterWipes && xctx.Err() == nil {
		if !nm.wipeVoter(xctx, false, true) {
			nm.sleep(xctx, 250*time.Millisecond)
		}
	}
}

func (nm *Nemesis) pick() string {
	total := 0
	for _, w := range nm.weight {
		total += w
	}
	x := nm.intn(total)
	for i, w := range nm.weight {
		if x < w {
			return nm.faults[i]
		}
		x -= w
	}
	return nm.faults[0]
}

func (nm *Nemesis) intn(n int) int {
	nm.rngMu.Lock()
	defer nm.rngMu.Unlock()
	return nm.rng.Intn(n)
}

func (nm *Nemesis) int63n(n int64) int64 {
	nm.rngMu.Lock()
	defer nm.rngMu.Unlock()
	return nm.rng.Int63n(n)
}

func (nm *Nemesis) shuffle(n int, swap func(i, j int)) {
	nm.rngMu.Lock()
	defer nm.rngMu.Unlock()
	nm.rng.Shuffle(n, swap)
}

func (nm *Nemesis) count(c *int) {
	nm.mu.Lock()
	*c++
	nm.mu.Unlock()
}

func (nm *Nemesis) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(nm.int63n(int64(hi-lo)))
}

// sleep waits d or until ctx ends; faults are undone either way.
func (nm *Nemesis) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (nm *Nemesis) event(kind string, leader bool, detail string, nodes ...*Node) {
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	e := nm.h.AddEvent(Event{Kind: kind, Nodes: ids, Leader: leader, Detail: detail})
	nm.logf("nemesis: %v", e)
}

func (nm *Nemesis) leader(ctx context.Context) *Node {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	n, epoch := nm.c.Leader(lctx)
	if n != nil {
		nm.mu.Lock()
		nm.leaderEpoch = epoch
		nm.mu.Unlock()
	}
	return n
}

// watchElection polls, for at most 20s, until some node leads an epoch
// above epoch, and records how long that took since the kill at start.
func (nm *Nemesis) watchElection(epoch uint64, start time.Time) {
	nm.watchers.Add(1)
	go func() {
		defer nm.watchers.Done()
		ctx, cancel := context.WithTimeout(nm.watchCtx, 20*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			if n, e := nm.c.Leader(ctx); n != nil && e > epoch {
				d := time.Since(start)
				nm.mu.Lock()
				nm.stats.Elections = append(nm.stats.Elections, d)
				nm.mu.Unlock()
				nm.event("elected", false, fmt.Sprintf("epoch %d, %v after the leader's kill", e, d.Round(time.Millisecond)), n)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

func (nm *Nemesis) randomNode() *Node { return nm.c.Nodes[nm.intn(len(nm.c.Nodes))] }

func (nm *Nemesis) mode() BlockMode {
	if nm.intn(2) == 0 {
		return Refuse
	}
	return Drop
}

// kill SIGKILLs n, recording whether it was the leader (and then timing
// the election of the next one).
func (nm *Nemesis) kill(n *Node, leader *Node, detail string) {
	start := time.Now()
	if len(nm.c.Kill(n)) == 0 {
		return // not running (another fault worker got it first)
	}
	nm.count(&nm.stats.Kills)
	nm.event("kill", n == leader, detail, n)
	if n == leader {
		nm.mu.Lock()
		epoch := nm.leaderEpoch
		nm.mu.Unlock()
		nm.watchElection(epoch, start)
	}
}

// restart starts n again on its directory and waits (bounded) until it
// serves HTTP.
func (nm *Nemesis) restart(ctx context.Context, n *Node) {
	if n.Running() || n.Wiping() {
		return // a wipe restarts its node itself
	}
	for try := 0; try < 3; try++ {
		if n.Running() || n.Wiping() {
			return // restarted by another fault worker
		}
		if err := nm.c.Start(n); err != nil {
			nm.logf("nemesis: restart %s: %v", n.ID, err)
			continue
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err := nm.c.WaitReady(rctx, n)
		cancel()
		if err == nil {
			nm.event("restart", false, "", n)
			return
		}
		nm.logf("nemesis: restart %s: %v", n.ID, err)
		nm.c.Kill(n)
	}
	nm.event("restart-failed", false, "", n)
}

// wipe wipes observer n (Cluster.Wipe: SIGKILL, data directory deleted,
// started again empty) and waits (bounded) until it serves HTTP.
func (nm *Nemesis) wipe(ctx context.Context, n *Node) {
	if err := nm.c.Wipe(n); err != nil {
		nm.logf("nemesis: wipe %s: %v", n.ID, err)
		if !n.Running() && !n.Wiping() {
			nm.restart(ctx, n)
		}
		return
	}
	nm.count(&nm.stats.Wipes)
	nm.event("wipe", false, "data directory deleted, restarted empty", n)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := nm.c.WaitReady(rctx, n); err != nil {
		nm.logf("nemesis: %s after its wipe: %v", n.ID, err)
		nm.c.Kill(n)
		nm.restart(ctx, n)
	}
}

// committedVoters returns the nodes of the leader's committed voter set
// (nil if there is no leader or its set is not committed).
func (nm *Nemesis) committedVoters(ctx context.Context) []*Node {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	_, st, ok := nm.c.LeaderStatus(sctx)
	if !ok || !st.VotersCommitted() {
		return nil
	}
	var out []*Node
	for _, n := range nm.c.Nodes {
		if _, in := st.VoterAt(n.ID); in {
			out = append(out, n)
		}
	}
	return out
}

// wipeVoter wipes a random voter of the committed set (FaultWipeVoter)
// and waits until the leader's committed set names it at its new
// directory, then reads its whole log into the history. It does nothing
// while another voter wipe or a rolling restart is under way, or without
// a committed voter set of 3 or more all running (a wipe must not cost
// the majority).
//
// With crashLeader (FaultWipeCrashLeader, 3 voters only) it sets up the
// loss a wiped voter would cause: the third voter is paused so that appends commit on the
// leader and the target alone, the target is wiped right after an ack,
// the leader is SIGKILLed, the paused voter resumed, and the leader
// restarted after a while. A wiped voter that voted as its old self
// would elect the paused one, which lacks those acknowledged appends.
//
// It reports whether it wiped a voter; quiet leaves a refusal unlogged.
func (nm *Nemesis) wipeVoter(ctx context.Context, crashLeader, quiet bool) bool {
	if !nm.voterMu.TryLock() {
		return false
	}
	defer nm.voterMu.Unlock()
	voters := nm.committedVoters(ctx)
	if len(voters) < 3 {
		if !quiet {
			nm.logf("nemesis: no voter wiped: committed voter set %s", ids(voters))
		}
		return false
	}
	for _, n := range voters {
		if !n.Running() || n.Wiping() {
			if !quiet {
				nm.logf("nemesis: no voter wiped: %s is down", n.ID)
			}
			return false
		}
	}
	leader := nm.leader(ctx)
	target := voters[nm.intn(len(voters))]
	var paused *Node
	if crashLeader {
		if leader == nil || len(voters) != 3 {
			return false
		}
		var others []*Node
		for _, n := range voters {
			if n != leader {
				others = append(others, n)
			}
		}
		target, paused = others[0], others[1]
		if nm.intn(2) == 0 {
			target, paused = paused, target
		}
		if !nm.c.Pause(paused) {
			return false
		}
		nm.count(&nm.stats.Pauses)
		nm.event("pause", false, "wipe-crash-leader: appends commit on the leader and the voter to wipe", paused)
		nm.sleep(ctx, nm.between(300*time.Millisecond, time.Second))
		nm.waitAck(ctx)
	}
	start := time.Now()
	if err := nm.c.Wipe(target); err != nil {
		nm.logf("nemesis: wipe %s: %v", target.ID, err)
		if !target.Running() && !target.Wiping() {
			nm.restart(ctx, target)
		}
		if paused != nil {
			nm.c.Resume(paused)
		}
		return false
	}
	nm.count(&nm.stats.VoterWipes)
	nm.event("wipe-voter", target == leader, "data directory deleted, restarted empty", target)
	if paused != nil {
		nm.kill(leader, leader, "wipe-crash-leader: right after the wipe")
		nm.c.Resume(paused)
		nm.event("resume", false, "wipe-crash-leader: with the wiped voter and without the leader", paused)
		nm.sleep(ctx, nm.between(2*time.Second, 4*time.Second))
		nm.restart(ctx, leader)
	} else if target == leader {
		nm.mu.Lock()
		epoch := nm.leaderEpoch
		nm.mu.Unlock()
		nm.watchElection(epoch, start)
	}
	// The replacement is waited for past the end of the run: the next
	// fault, or the final checks, find the voter set whole again.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReplaceTimeout)
	defer cancel()
	fail := func(why string) {
		msg := fmt.Sprintf("%s wiped at %.3fs: %s", target.ID, nm.h.Now().Seconds(), why)
		nm.mu.Lock()
		nm.stats.ReplaceFailures = append(nm.stats.ReplaceFailures, msg)
		nm.mu.Unlock()
		nm.event("replace-failed", false, why, target)
	}
	if err := nm.c.WaitReady(wctx, target); err != nil {
		fail(err.Error())
		nm.c.Kill(target)
		nm.restart(ctx, target)
		return true
	}
	ready := time.Now()
	var dir string
	for dir == "" && wctx.Err() == nil {
		sctx, scancel := context.WithTimeout(wctx, time.Second)
		st, err := nm.c.Status(sctx, target)
		scancel()
		if err == nil {
			dir = st.DirectoryID
		}
	}
	if err := nm.c.WaitVoter(wctx, target.ID, dir, false); err != nil {
		fail(err.Error())
		return true
	}
	d := time.Since(ready)
	nm.mu.Lock()
	nm.stats.Replacements = append(nm.stats.Replacements, d)
	k := nm.stats.VoterWipes
	nm.mu.Unlock()
	nm.event("replaced", false, fmt.Sprintf("a voter again at directory %s, %v after its restart", dir, d.Round(time.Millisecond)), target)

	// Its reads after rejoining: the whole log it serves, checked as one
	// reader's session (acknowledged entries at their offsets, nothing
	// the final logs lack).
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer rcancel()
	var next uint64
	err := nm.c.Entries(rctx, target, 0, false, func(e LogEntry) error {
		nm.h.AddRead(Read{Reader: WipeReaderBase + k, Node: target.ID, Offset: e.Offset, Payload: e.Payload})
		next = e.Offset + 1
		return nil
	})
	var oor *OutOfRangeError
	if errors.As(err, &oor) {
		nm.h.AddRead(Read{Reader: WipeReaderBase + k, Node: target.ID, Reset: true, From: 0, Offset: oor.LogStart})
	} else if err != nil && !errors.Is(err, io.EOF) {
		nm.logf("nemesis: reading %s's log after its replacement (at %d): %v", target.ID, next, err)
	}
	return true
}

// rollingRestart restarts every voter of the committed set in turn
// (FaultRollingRestart): SIGTERM, wait for the exit, start on the same
// directory, wait until the leader's committed set counts it caught up,
// then the next. The "terminate" and "rejoined" events bound each
// restart (RollingGaps).
func (nm *Nemesis) rollingRestart(ctx context.Context) {
	if !nm.voterMu.TryLock() {
		return
	}
	defer nm.voterMu.Unlock()
	// The nemesis may start before the cluster has committed its first
	// voter set (under load, its first election can take a while): wait
	// for it, bounded, rather than restart nobody (CI: 0 nodes restarted).
	voters := nm.committedVoters(ctx)
	for deadline := time.Now().Add(20 * time.Second); len(voters) == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		voters = nm.committedVoters(ctx)
	}
	for _, n := range voters {
		leader := nm.leader(ctx)
		nm.event("terminate", n == leader, "rolling restart: SIGTERM", n)
		if !nm.c.Terminate(n, 20*time.Second) {
			nm.event("rejoined", false, "rolling restart: was not running", n)
			continue
		}
		nm.count(&nm.stats.RollingRestarts)
		nm.restart(ctx, n)
		dir := ""
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		for dir == "" && sctx.Err() == nil {
			if st, err := nm.c.Status(sctx, n); err == nil {
				dir = st.DirectoryID
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
		err := errors.New("no directory ID in its status")
		if dir != "" {
			err = nm.c.WaitVoter(sctx, n.ID, dir, true)
		}
		cancel()
		detail := "rolling restart: back and caught up"
		if err != nil {
			detail = "rolling restart: " + err.Error()
		}
		nm.event("rejoined", false, detail, n)
	}
}

func (nm *Nemesis) do(ctx context.Context, f string) {
	switch f {
	case FaultKill, FaultKillLeader, FaultKillAfterAck:
		leader := nm.leader(ctx)
		target := leader
		detail := ""
		switch {
		case f == FaultKill || leader == nil:
			target = nm.randomNode()
		case f == FaultKillAfterAck:
			detail = nm.waitAck(ctx)
		}
		nm.kill(target, leader, detail)
		nm.sleep(ctx, nm.between(200*time.Millisecond, 3*time.Second))
		nm.restart(ctx, target)

	case FaultCrashMajority:
		// Minority and majority are counted among the voters; observers
		// stay up and connected.
		voters := nm.c.Voters()
		leader := nm.leader(ctx)
		if leader == nil {
			leader = voters[nm.intn(len(voters))]
		}
		var others []*Node
		for _, n := range voters {
			if n != leader {
				others = append(others, n)
			}
		}
		nm.shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		minority := others[:(len(voters)-1)/2]
		rest := others[len(minority):]
		mode := nm.mode()
		nm.isolateGroup(minority, mode)
		nm.count(&nm.stats.Partitions)
		nm.event("partition", false, "minority cut off before crash ("+mode.String()+")", minority...)
		nm.sleep(ctx, nm.between(500*time.Millisecond, 2*time.Second))
		detail := "crash-majority " + nm.waitAck(ctx)
		victims := nm.c.Kill(append([]*Node{leader}, rest...)...)
		for _, n := range victims {
			nm.count(&nm.stats.Kills)
			nm.event("kill", n == leader, detail, n)
		}
		for _, n := range rest {
			nm.restart(ctx, n)
		}
		nm.c.Net.HealAll()
		nm.event("heal", false, "", minority...)
		nm.sleep(ctx, nm.between(500*time.Millisecond, 3*time.Second))
		nm.restart(ctx, leader)

	case FaultIsolateKillLeader:
		leader := nm.leader(ctx)
		if leader == nil {
			return
		}
		mode := nm.mode()
		nm.isolateGroup([]*Node{leader}, mode)
		nm.count(&nm.stats.Partitions)
		nm.event("partition", true, "isolate before kill ("+mode.String()+")", leader)
		nm.sleep(ctx, nm.between(nm.HoldMin, nm.HoldMax))
		// By now another leader is usually in place: not a leader kill
		// for the fail-over figures.
		nm.kill(leader, nil, "while isolated (the leader when cut off)")
		nm.c.Net.HealAll()
		nm.event("heal", false, "")
		nm.sleep(ctx, nm.between(200*time.Millisecond, 2*time.Second))
		nm.restart(ctx, leader)

	case FaultCrashAll:
		leader := nm.leader(ctx)
		detail := "crash-majority (all) " + nm.waitAck(ctx)
		for _, n := range nm.c.Kill(nm.c.Nodes...) {
			nm.count(&nm.stats.Kills)
			nm.event("kill", n == leader, detail, n)
		}
		nm.sleep(ctx, nm.between(100*time.Millisecond, 2*time.Second))
		for _, n := range nm.shuffled() {
			nm.restart(ctx, n)
		}

	case FaultFlap:
		target := nm.randomNode()
		leader := nm.leader(ctx)
		if leader != nil && nm.intn(2) == 0 {
			target = leader
		}
		for i, k := 0, 2+nm.intn(3); i < k; i++ {
			nm.kill(target, leader, fmt.Sprintf("flap %d/%d", i+1, k))
			leader = nil // only the first kill can hit a known leader
			nm.sleep(ctx, nm.between(0, 300*time.Millisecond))
			nm.restart(ctx, target)
			nm.sleep(ctx, nm.between(0, 500*time.Millisecond))
		}

	case FaultWipeObserver:
		var observers []*Node
		for _, n := range nm.c.Nodes {
			if n.Observer {
				observers = append(observers, n)
			}
		}
		if len(observers) == 0 {
			return
		}
		target := observers[nm.intn(len(observers))]
		nm.wipe(ctx, target)

	case FaultWipeVoter, FaultWipeCrashLeader:
		nm.wipeVoter(ctx, f == FaultWipeCrashLeader, false)

	case FaultRollingRestart:
		nm.rollingRestart(ctx)

	case FaultPause:
		target := nm.randomNode()
		leader := nm.leader(ctx)
		if leader != nil && nm.intn(2) == 0 {
			target = leader
		}
		if !nm.c.Pause(target) {
			return
		}
		nm.count(&nm.stats.Pauses)
		nm.event("pause", target == leader, "", target)
		nm.sleep(ctx, nm.between(nm.HoldMin, nm.HoldMax))
		nm.c.Resume(target)
		nm.event("resume", false, "", target)

	case FaultIsolate:
		target := nm.randomNode()
		leader := nm.leader(ctx)
		if leader != nil && nm.intn(3) > 0 {
			target = leader
		}
		mode := nm.mode()
		nm.isolateGroup([]*Node{target}, mode)
		nm.partitioned(ctx, target == leader, "isolate ("+mode.String()+")", target)

	case FaultSplit:
		nodes := nm.shuffled()
		minority := nodes[:1+nm.intn((len(nodes)-1)/2)]
		mode := nm.mode()
		nm.isolateGroup(minority, mode)
		nm.partitioned(ctx, false, "split, minority cut off ("+mode.String()+")", minority...)

	case FaultBridge:
		nodes := nm.shuffled()
		bridge, rest := nodes[0], nodes[1:]
		a, b := rest[:len(rest)/2], rest[len(rest)/2:]
		mode := nm.mode()
		for _, x := range a {
			for _, y := range b {
				nm.c.Net.Block(x.ID, y.ID, mode)
			}
		}
		nm.partitioned(ctx, false, fmt.Sprintf("bridge %s between %s | %s (%s)", bridge.ID, ids(a), ids(b), mode), nodes...)

	case FaultSlow:
		target := nm.randomNode()
		leader := nm.leader(ctx)
		if leader != nil && nm.intn(2) == 0 {
			target = leader
		}
		d := nm.between(50*time.Millisecond, 1500*time.Millisecond)
		for _, n := range nm.c.Nodes {
			if n != target {
				nm.c.Net.Link(n.ID, target.ID).SetDelay(d)
				nm.c.Net.Link(target.ID, n.ID).SetDelay(d)
			}
		}
		nm.count(&nm.stats.Slows)
		nm.event("slow", target == leader, fmt.Sprintf("links +%v per chunk", d.Round(time.Millisecond)), target)
		nm.sleep(ctx, nm.between(nm.HoldMin, nm.HoldMax))
		nm.c.Net.HealAll()
		nm.event("heal", false, "")

	case FaultOneWay:
		target := nm.randomNode()
		leader := nm.leader(ctx)
		if leader != nil && nm.intn(2) == 0 {
			target = leader
		}
		mode := nm.mode()
		var detail string
		switch nm.intn(3) {
		case 0: // target cannot send
			for _, n := range nm.c.Nodes {
				if n != target {
					nm.c.Net.BlockDir(target.ID, n.ID, mode)
				}
			}
			detail = target.ID + " -/-> all"
		case 1: // target cannot receive
			for _, n := range nm.c.Nodes {
				if n != target {
					nm.c.Net.BlockDir(n.ID, target.ID, mode)
				}
			}
			detail = "all -/-> " + target.ID
		default: // one link
			other := nm.randomNode()
			for other == target {
				other = nm.randomNode()
			}
			nm.c.Net.BlockDir(target.ID, other.ID, mode)
			detail = target.ID + " -/-> " + other.ID
		}
		nm.partitioned(ctx, target == leader, "one-way "+detail+" ("+mode.String()+")", target)
	}
}

// waitAck drains old acknowledgements and waits (bounded) for the next
// one, so that the following kill lands right after an ack, when the
// followers may not have learned the new HW yet.
func (nm *Nemesis) waitAck(ctx context.Context) string {
	for len(nm.acked) > 0 {
		<-nm.acked
	}
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	select {
	case <-nm.acked:
		return "right after an ack"
	case <-t.C:
		return "no ack within 3s"
	case <-ctx.Done():
		return ""
	}
}

// partitioned records a partition already in place, holds it and heals.
func (nm *Nemesis) partitioned(ctx context.Context, leader bool, detail string, nodes ...*Node) {
	nm.count(&nm.stats.Partitions)
	nm.event("partition", leader, detail, nodes...)
	nm.sleep(ctx, nm.between(nm.HoldMin, nm.HoldMax))
	nm.c.Net.HealAll()
	nm.event("heal", false, "")
}

// isolateGroup cuts every link between group and the other nodes, both
// ways.
func (nm *Nemesis) isolateGroup(group []*Node, mode BlockMode) {
	in := map[*Node]bool{}
	for _, n := range group {
		in[n] = true
	}
	for _, x := range group {
		for _, y := range nm.c.Nodes {
			if !in[y] {
				nm.c.Net.Block(x.ID, y.ID, mode)
			}
		}
	}
}

func (nm *Nemesis) shuffled() []*Node {
	nodes := append([]*Node(nil), nm.c.Nodes...)
	nm.shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	return nodes
}

func ids(nodes []*Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.ID)
	}
	return strings.Join(s, ",")
}

// HealAll undoes every fault: heals the network, resumes paused nodes and
// restarts dead ones.
func (nm *Nemesis) HealAll() {
	nm.c.Net.HealAll()
	for _, n := range nm.c.Nodes {
		if n.Paused() {
			nm.c.Resume(n)
			nm.event("resume", false, "final heal", n)
		}
	}
	for _, n := range nm.c.Nodes {
		if !n.Running() {
			nm.restart(context.Background(), n)
		}
	}
	nm.event("heal", false, "final heal")
}
