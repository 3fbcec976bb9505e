package simulation

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/replog-io/replog/replica"
)

// The nemesis: crashes, pauses, connection resets and network partitions
// in the fault phase.

func (s *sim) crashTimer() {
	if s.rng.Float64() < s.p.massCrashProb {
		// A power cut: several nodes at the same instant (KIP-101's
		// second failure needs the leader and a follower down together).
		for _, nd := range s.nodes {
			if nd.up && s.rng.Intn(2) == 0 {
				s.crashNode(nd, "power cut", true)
			}
		}
		s.settleNoSyncLoss()
		return
	}
	if !s.opts.NoConnClose && s.rng.Float64() < linkResetProb {
		s.resetLink() // peerdown.go
		return
	}
	var victim *node
	if s.rng.Float64() < s.p.crashLeaderProb {
		for _, nd := range s.nodes {
			if nd.up && nd.role == replica.RoleLeader {
				victim = nd
			}
		}
	}
	if victim == nil {
		victim = s.randomUp()
	}
	if victim == nil {
		return
	}
	if s.rng.Float64() < s.p.pauseProb {
		s.pause(victim, s.now+s.between(s.p.fetchTimeout/2, 3*s.p.fetchTimeout))
		return
	}
	if victim.noSync && s.xr.Intn(4) != 0 {
		s.crashNode(victim, "machine crash", true)
		s.settleNoSyncLoss()
		return
	}
	s.crash(victim, "timer")
}

// pause stalls nd's process (GC, swapping, a stopped VM) until until: it
// handles nothing meanwhile, then everything that queued up at once. A
// node already paused stays paused until the later of the two times:
// events already deferred to the old resume time must not find the node
// running earlier (it would handle messages with no tick, its clock frozen
// at the earlier resume).
func (s *sim) pause(nd *node, until time.Duration) {
	if until <= nd.pausedUntil {
		s.res.Faults.PausesExtended++
		s.tracef("%s PAUSE until %s: already paused until %s", nd.id, fmtDur(until), fmtDur(nd.pausedUntil))
		return
	}
	if s.now < nd.pausedUntil {
		s.res.Faults.PausesExtended++
	}
	nd.pausedUntil = until
	s.touchNode(nd.idx, until+s.linger(), "a pause")
	s.hash.byte(0xA2)
	s.hash.u64(uint64(nd.pausedUntil))
	s.tracef("%s PAUSE until %s", nd.id, fmtDur(nd.pausedUntil))
	// On resume the shell's loop ticks first (the clock jumped), then
	// handles what queued up: a one-shot tick scheduled now comes before
	// every deferred event.
	s.schedule(nd.pausedUntil-s.now, event{kind: evTick, node: nd.idx, inc: nd.inc, id: oneShot})
}

// partition starts one network fault: a symmetric split, a one-way block
// or the isolation of a (leader) node; it heals later.
func (s *sim) partition() {
	n := len(s.nodes)
	if n < 2 {
		return
	}
	var pairs [][2]int
	var desc string
	switch s.rng.Intn(4) {
	case 0: // symmetric split into two random groups
		side := make([]bool, n)
		for i := range side {
			side[i] = s.rng.Intn(2) == 0
		}
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if side[a] != side[b] {
					pairs = append(pairs, [2]int{a, b})
				}
			}
		}
		desc = fmt.Sprintf("split %v", side)
	case 1: // one-way: a cannot send to b
		a, b := s.rng.Intn(n), s.rng.Intn(n)
		if a != b {
			pairs = append(pairs, [2]int{a, b})
		}
		desc = fmt.Sprintf("one-way %s-/->%s", s.nodes[a].id, s.nodes[b].id)
	case 2: // isolate the leader (or a random node), both ways or one way
		v := s.rng.Intn(n)
		for _, nd := range s.nodes {
			if nd.up && nd.role == replica.RoleLeader {
				v = nd.idx
			}
		}
		s.isolate(v, s.rng.Intn(3))
		return
	case 3: // one-way set: a random node cannot hear from a random group
		v := s.rng.Intn(n)
		for o := 0; o < n; o++ {
			if o != v && s.rng.Intn(2) == 0 {
				pairs = append(pairs, [2]int{o, v})
			}
		}
		desc = fmt.Sprintf("deafen %s", s.nodes[v].id)
	}
	s.addPartition(pairs, desc)
}

// isolate cuts node v off: dir 0 both ways, 1 outbound only, 2 inbound
// only.
func (s *sim) isolate(v, dir int) {
	var pairs [][2]int
	for o := range s.nodes {
		if o == v {
			continue
		}
		if dir != 2 {
			pairs = append(pairs, [2]int{v, o})
		}
		if dir != 1 {
			pairs = append(pairs, [2]int{o, v})
		}
	}
	s.addPartition(pairs, fmt.Sprintf("isolate %s dir=%d", s.nodes[v].id, dir))
}

func (s *sim) addPartition(pairs [][2]int, desc string) {
	if len(pairs) == 0 {
		return
	}
	s.res.Partitions++
	s.nextPart++
	id := s.nextPart
	s.partitions[id] = pairs
	for _, p := range pairs {
		s.blocked[p[0]][p[1]]++
	}
	s.faultAt(s.now, "a partition")
	s.hash.byte(0xC2)
	s.hash.u64(uint64(len(pairs)))
	s.tracef("PARTITION #%d %s", id, desc)
	s.schedule(s.between(ms(1), s.p.healMax), event{kind: evHeal, id: id})
}

func (s *sim) heal(id int) {
	pairs, ok := s.partitions[id]
	if !ok {
		return
	}
	delete(s.partitions, id)
	for _, p := range pairs {
		s.blocked[p[0]][p[1]]--
		s.touchLink(p[0], p[1], s.now, "a partition")
	}
	s.tracef("HEAL #%d", id)
}

// faulting says whether new faults may start: in the fault phase, outside
// lulls.
func (s *sim) faulting() bool { return s.phase == phaseFaults && s.now >= s.lullUntil }

// chooseExtended draws the knobs of the extended faults (params.extended)
// for a non-classic run.
func chooseExtended(p *params, r *rand.Rand) {
	p.extended = true
	if r.Intn(4) == 0 {
		// 6 or 7 voters: majorities of 4; more nodes can fail at once.
		p.voters = 6 + r.Intn(2)
	}
	p.lulls = r.Intn(2) == 0
	if r.Intn(2) == 0 {
		p.xincProb = 0.2 * r.Float64()
		p.dupProb = max(p.dupProb, 0.01)
	}
	if r.Intn(2) == 0 {
		p.clockEvery = ms(60 + 400*r.Float64())
	}
	if r.Intn(3) == 0 {
		p.diskErrProb = 0.01 * r.Float64()
	}
	if r.Intn(2) == 0 {
		p.tornProb = r.Float64()
	}
	if r.Intn(3) == 0 {
		n := p.voters + p.observers
		p.noSync = make([]bool, n)
		for i := range p.noSync {
			// Mostly a minority of the voters: a NoSync node's loss is
			// then rarely the loss of a committed entry's last majority.
			p.noSync[i] = r.Intn(3) == 0
		}
		p.noSyncFlush = ms(10 + 90*r.Float64())
	}
	if r.Intn(2) == 0 {
		p.falseHintProb = 0.3 * r.Float64()
	}
}

// setupExtended starts the timers of the extended faults.
func (s *sim) setupExtended() {
	if !s.p.extended {
		return
	}
	if s.p.voters >= 6 {
		s.res.Faults.BigClusters++
	}
	for _, nd := range s.nodes {
		if nd.noSync {
			s.res.Faults.NoSyncNodes++
		}
	}
	if s.p.lulls {
		s.schedule(s.between(0, s.liveBound()), event{kind: evLull})
	}
	if s.p.clockEvery > 0 {
		s.schedule(s.between(0, 2*s.p.clockEvery), event{kind: evClockTimer})
	}
}

// lull starts a lull: for about liveBound no new fault starts (those
// running end on their own), so that liveness rule 1 is checked while the
// fault phase runs. The next storm lasts a fraction of liveBound.
func (s *sim) lull() {
	if s.phase != phaseFaults {
		return
	}
	b := s.liveBound()
	s.lullUntil = s.now + s.between(b/2, 3*b/2)
	s.res.Faults.Lulls++
	s.hash.byte(0xA3)
	s.hash.u64(uint64(s.lullUntil))
	s.tracef("LULL until %s", fmtDur(s.lullUntil))
	s.schedule(s.lullUntil-s.now+s.between(b/4, b), event{kind: evLull})
}

// clockFault jumps a random live node's clock forward or stalls it (an
// NTP step, a VM migrated or frozen): its timers fire all at once, or not
// at all for a while. Either way the clock never runs backwards.
func (s *sim) clockFault() {
	nd := s.nodes[s.xr.Intn(len(s.nodes))]
	if !nd.up {
		return
	}
	now := nd.clock(s.now)
	if s.xr.Intn(2) == 0 {
		d := s.between(s.p.fetchTimeout/2, 3*s.p.fetchTimeout)
		if s.xr.Intn(8) == 0 {
			d = time.Duration(1+s.xr.Intn(3600)) * time.Second // a long jump
		}
		s.res.Faults.ClockJumps++
		nd.clockBase = now.Add(d)
		nd.clockFrom = max(nd.clockFrom, s.now)
		s.rearm(nd) // its deadline comes sooner: the timer fires at once
		// The core sees the jump at its next tick or loop round.
		s.touchNode(nd.idx, s.now+s.linger(), "a clock jump")
		s.hash.byte(0xA4)
		s.hash.u64(uint64(d))
		s.tracef("%s CLOCK JUMP +%v", nd.id, d)
		return
	}
	d := s.between(s.p.fetchTimeout/2, 3*s.p.fetchTimeout)
	s.res.Faults.ClockStalls++
	// The clock reads now until s.now+d, then runs on from there (behind
	// by d for good).
	nd.clockBase = now
	nd.clockFrom = max(nd.clockFrom, s.now+d)
	s.rearm(nd)
	s.touchNode(nd.idx, nd.clockFrom+s.linger(), "a clock stall")
	s.hash.byte(0xA5)
	s.hash.u64(uint64(d))
	s.tracef("%s CLOCK STALL until %s", nd.id, fmtDur(nd.clockFrom))
}

// linger is how long a pause or a clock fault still acts after it ends: the
// core sees the time it lost at its next tick, when its fetch may be due
// for a retry (FetchMaxWait+ElectionTimeout) and the answer to the old one
// no longer counts; its next fetch round sets it right.
func (s *sim) linger() time.Duration {
	return s.p.fetchMaxWait + s.p.electionTimeout + s.p.tickMax + s.p.batchWindow
}
