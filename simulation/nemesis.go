package simulation

import (
	"fmt"
	"time"

	"github.com/replog-io/replog/replica"
)

// The nemesis: crashes, pauses and network partitions in the fault phase.

func (s *sim) crashTimer() {
	if s.rng.Float64() < s.p.massCrashProb {
		// A power cut: several nodes at the same instant (KIP-101's
		// second failure needs the leader and a follower down together).
		for _, nd := range s.nodes {
			if nd.up && s.rng.Intn(2) == 0 {
				s.crash(nd, "power cut")
			}
		}
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
		s.res.PausesExtended++
		s.tracef("%s PAUSE until %s: already paused until %s", nd.id, fmtDur(until), fmtDur(nd.pausedUntil))
		return
	}
	if s.now < nd.pausedUntil {
		s.res.PausesExtended++
	}
	nd.pausedUntil = until
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
	}
	s.tracef("HEAL #%d", id)
}
