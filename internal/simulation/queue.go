package simulation

import (
	"time"

	"github.com/replog-io/replog/replica"
)

// evKind says what an event does when it fires.
type evKind uint8

const (
	evTick           evKind = iota + 1 // node's deadline passed (R97), or its process resumed
	evDeliver                          // a message arrives at its destination
	evDisk                             // the node's disk finishes writes up to seq
	evReport                           // the shell reports finished writes with Persisted
	evPropose                          // workload: an append on a random node
	evRead                             // workload: a read on a random node
	evCrash                            // a node crashes
	evRestart                          // a crashed node restarts
	evCrashTimer                       // fault process: pick a node to crash
	evPartitionTimer                   // fault process: start a partition
	evHeal                             // a partition heals
	evGossip                           // membership: gossip round for a node
	evHint                             // a membership hint arrives
	evFailHint                         // membership notices a crashed node
	evRound                            // the node's shell runs a round (shell.Node.Round)
	evSync                             // the lying disk really syncs (sabotage); a NoSync node's OS writes back
	evLull                             // nemesis: a lull begins (params.lulls)
	evClockTimer                       // nemesis: jump or stall a node's clock
	evBarrier                          // workload: a read barrier (barrier.go)
	evDelete                           // workload: a retention request (retention.go)
	evLag                              // nemesis: a node lags while its leader deletes
	evWipe                             // nemesis: an observer restarts on an empty store
	evVoterChange                      // workload: a voter change (voters.go)
	evVoterWipe                        // nemesis: a voter restarts on an empty store (voters.go)
	evRetry                            // exactly-once workload: an append tried again (exactlyonce.go)
	evVersion                          // version mix: an upgrade, rollback or roll-forward (versions.go)
	evLogChange                        // workload: a log change, or its retry (catalog.go)
	evEarlyTick                        // R96's check: a round without inputs before a node's deadline (deadline.go)
	evContact                          // the node's contact timer: heartbeats due, peers silent (quiescence.go)
	evSnapshot                         // a snapshot save, or a snapshot read or write done (snapshot.go)
	evCompact                          // a compaction pass starts on a random node, or rewrites its range (compaction.go)
)

var evNames = [...]string{
	evTick: "tick", evDeliver: "deliver", evDisk: "disk", evReport: "report",
	evPropose: "propose", evRead: "read", evCrash: "crash", evRestart: "restart",
	evCrashTimer: "crash-timer", evPartitionTimer: "partition-timer", evHeal: "heal",
	evGossip: "gossip", evHint: "hint", evFailHint: "fail-hint", evRound: "round", evSync: "sync",
	evLull: "lull", evClockTimer: "clock-timer", evBarrier: "barrier", evDelete: "delete", evLag: "lag", evWipe: "wipe",
	evVoterChange: "voter-change", evVoterWipe: "voter-wipe", evRetry: "retry", evVersion: "version",
	evLogChange: "log-change", evEarlyTick: "early-tick", evContact: "contact", evSnapshot: "snapshot", evCompact: "compact",
}

func (k evKind) String() string { return evNames[k] }

// event is one scheduled happening. Events fire in (at, seq) order; seq is
// a global counter, so equal times keep their scheduling order and the run
// is a pure function of the seed.
type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	// clean: a message delivered within the normal network delay, neither
	// a duplicate nor lane-queued (liveness.go counts it as contact).
	clean bool
	node  int
	inc   int // the node's incarnation the event belongs to
	id    int // partition id for evHeal; lane retries for evDeliver
	wseq  uint64
	// msg: the message of an evDeliver, an index into sim.msgs; hkind:
	// the Kind of an evHint (its Node is nodes[id], its Epoch wseq).
	// Events hold no pointers, so that moving them in the heap is cheap
	// (no write barriers).
	msg   int32
	hkind replica.HintKind
	// twin: an evDeliver of one of the two copies of a duplicated
	// quiescent message, numbered as in sim.twins; 0 for any other.
	twin int32
}

// eventQueue is a binary min-heap of events by (at, seq). Hand-written
// rather than container/heap to avoid interface conversions on the hot
// path.
type eventQueue struct{ h []event }

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *eventQueue) len() int { return len(q.h) }

func (q *eventQueue) push(e event) {
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h[last] = event{}
	q.h = q.h[:last]
	i := 0
	for {
		l, r := 2*i+1, 2*i+2
		m := i
		if l < len(q.h) && q.less(l, m) {
			m = l
		}
		if r < len(q.h) && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
