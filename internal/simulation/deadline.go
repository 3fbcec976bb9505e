package simulation

import (
	"math"
	"reflect"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/replica"
)

// A node's process ticks as the library's loop does (docs/protocol.md
// R97): a round runs when an input reaches the node, and when the
// deadline of its last round (Output.Deadline, R96) passes on its clock,
// up to tickMax late (the scheduler's slack and the loop's wake-up). No
// timer of its own.
//
// And R96 itself: at random, before a deadline, the simulation runs an
// extra round with no input (an early tick) and checks that it does
// nothing: an empty Output, the same Status and the same deadline.

// deadlineState is a node's deadline bookkeeping.
type deadlineState struct {
	// at is the core's deadline after the last round (core time; zero:
	// none); gen numbers the arming, so that a tick armed for an older
	// deadline does nothing.
	at  time.Time
	gen uint64
	// fed is the Persisted the last round fed the core: an early tick
	// must not feed it a newer one (that is an input).
	fed uint64
	// stuck counts rounds in a row, without inputs, that left a deadline
	// at or before the clock and did nothing: a core that says something
	// is due and then does nothing would spin its loop. A round that made
	// progress (wrote, resolved or changed its Status) resets it: a long
	// catch-up may keep a deadline due for many rounds, each doing its
	// share (a key table's rebuild moves Status.KeysApplied). Sending
	// alone is no progress: a core that sends the same message in every
	// round of a deadline it leaves due floods its peers at its loop's
	// speed.
	stuck int
	// status is the Status the last round ended with.
	status replica.Status
}

// earlyTickOdds: one deadline in earlyTickOdds gets an early tick.
const earlyTickOdds = 4

// maxStuckRounds is how many input-less rounds in a row may leave the
// deadline due without doing anything: the first one may, when a round's
// events set a term that only Tick checks; after that the rounds must
// move it or make progress.
const maxStuckRounds = 3

// simTimeOf is the earliest simulated time, not before now, at which nd's
// clock reads at least d.
func (nd *node) simTimeOf(d time.Time, now time.Duration) time.Duration {
	if !nd.clock(now).Before(d) {
		return now
	}
	t := max(now, nd.clockFrom+time.Duration(math.Ceil(float64(d.Sub(nd.clockBase))/nd.clockRate)))
	for nd.clock(t).Before(d) {
		t++ // float rounding
	}
	return t
}

// armDeadline records the deadline of nd's round just run and schedules
// the tick for it (and, at random, an early tick before it).
func (s *sim) armDeadline(nd *node, out *shell.Output, fed uint64, inputs int) {
	dl := &nd.dl
	dl.fed = fed
	if inputs == 0 && !out.Deadline.IsZero() && !out.Deadline.After(nd.clock(s.now)) && !progressed(out, dl.status) {
		if dl.stuck++; dl.stuck > maxStuckRounds {
			s.fail("%s: %d rounds in a row without inputs left its deadline %v due (its clock reads %v) and did nothing: the core says something is due and does nothing",
				nd.id, dl.stuck, out.Deadline, nd.clock(s.now))
		}
	} else {
		dl.stuck = 0
	}
	dl.at = out.Deadline
	dl.status = out.Status
	s.rearm(nd)
}

// progressed reports whether a round did something: wrote, resolved,
// handed out snapshot work, moved what readers see, or ended with another
// Status than before (prev). Messages alone do not count (stuck).
func progressed(out *shell.Output, prev replica.Status) bool {
	return len(out.Writes) > 0 || len(out.Resolved) > 0 || out.KeyCheckpoint != nil ||
		len(out.SnapshotReads) > 0 || len(out.SnapshotChunks) > 0 || out.ReadableMoved || out.ClaimChanged || out.LogsChanged ||
		!reflect.DeepEqual(prev, out.Status)
}

// rearm schedules nd's tick for its deadline as its clock now runs (after
// a round, or after a clock fault moved its clock).
func (s *sim) rearm(nd *node) {
	dl := &nd.dl
	dl.gen++
	if dl.at.IsZero() {
		return
	}
	at := nd.simTimeOf(dl.at, s.now)
	s.schedule(at-s.now+s.between(0, s.p.tickMax), event{kind: evTick, node: nd.idx, inc: nd.inc, wseq: dl.gen})
	if at > s.now+1 && s.er.Intn(earlyTickOdds) == 0 {
		early := s.now + time.Duration(s.er.Int63n(int64(at-s.now)))
		s.schedule(early-s.now, event{kind: evEarlyTick, node: nd.idx, inc: nd.inc, wseq: dl.gen})
	}
}

// staleTick reports whether ev is a tick armed for a deadline that a later
// round of its node replaced, or of a process that is gone.
func (s *sim) staleTick(ev event) bool {
	if ev.kind != evTick || ev.id == oneShot {
		return false
	}
	nd := s.nodes[ev.node]
	return !nd.up || nd.inc != ev.inc || ev.wseq != nd.dl.gen
}

// earlyTick is R96's check: a round with no input before nd's deadline
// does nothing.
func (s *sim) earlyTick(ev event) {
	nd := s.nodes[ev.node]
	if !nd.up || nd.inc != ev.inc || ev.wseq != nd.dl.gen || s.now < nd.pausedUntil ||
		nd.roundPending || len(nd.inbox) > 0 || nd.reportedSeq != nd.dl.fed {
		return // a round is due anyway, or an input waits for one
	}
	now := nd.clock(s.now)
	if !now.Before(nd.dl.at) {
		return
	}
	before := nd.r.Status()
	out := nd.sh.Round(now)
	s.res.EarlyTicks++
	if s.tracing() {
		s.tracef("%s early tick at %v, %v before its deadline", nd.id, now, nd.dl.at.Sub(now))
	}
	switch {
	case len(out.Writes) > 0 || len(out.Messages) > 0 || len(out.Resolved) > 0 || len(out.Stray) > 0 ||
		out.KeyCheckpoint != nil || len(out.SnapshotReads) > 0 || len(out.SnapshotChunks) > 0:
		s.fail("%s: a round without inputs %v before its deadline did something (R96): %d writes, messages %v, %d resolved, stray %v, key checkpoint %v, %d snapshot reads, %d snapshot chunks",
			nd.id, nd.dl.at.Sub(now), len(out.Writes), out.Messages, len(out.Resolved), out.Stray, out.KeyCheckpoint != nil, len(out.SnapshotReads), len(out.SnapshotChunks))
	case out.ReadableMoved || out.ClaimChanged || out.LogsChanged || out.Halted != nil:
		s.fail("%s: a round without inputs %v before its deadline moved the readable HW, the claim, the catalog or halted (R96)", nd.id, nd.dl.at.Sub(now))
	case !reflect.DeepEqual(before, out.Status):
		s.fail("%s: a round without inputs %v before its deadline changed Status (R96):\n%+v\nto\n%+v", nd.id, nd.dl.at.Sub(now), before, out.Status)
	case !out.Deadline.Equal(nd.dl.at):
		s.fail("%s: a round without inputs %v before its deadline moved the deadline from %v to %v (R96)", nd.id, nd.dl.at.Sub(now), nd.dl.at, out.Deadline)
	}
}
