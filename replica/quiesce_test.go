package replica

import (
	"testing"

	"github.com/replog-io/replog/fetcher"
	"github.com/replog-io/replog/protocol"
)

// TestQuiescedLogHasNoDeadline (R96, R99): once every follower of an idle
// three-voter log has quiesced, no core of it has a deadline: passing
// time changes nothing in them (only PeerSilent, Resync or a message
// moves them), so a shell that ticks at deadlines (R97) runs no round
// for them at all. Positive control: the same log below level 10 keeps
// its parked fetches' deadlines.
func TestQuiescedLogHasNoDeadline(t *testing.T) {
	for _, c := range []struct {
		level    string
		quiesces bool
	}{{"10", true}, {"9", false}} {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"), arg("supports", c.level))
		h.run(t, "elect", arg("n1"))
		h.run(t, "propose", arg("n1"), arg("a"))
		h.run(t, "run", arg("+5s"))
		for _, id := range []string{"n2", "n3"} {
			if q := h.node(id).r.quiesced(); q != c.quiesces {
				t.Fatalf("level %s: %s quiesced %v, want %v", c.level, id, q, c.quiesces)
			}
		}
		for _, id := range []string{"n1", "n2", "n3"} {
			n := h.node(id)
			d := n.r.NextDeadline()
			if c.quiesces && !d.IsZero() {
				t.Errorf("level %s: %s (%s) has a deadline %v after the log quiesced", c.level, id, n.r.role, d.Sub(n.now))
			}
			if !c.quiesces && d.IsZero() {
				t.Errorf("level %s: %s (%s) has no deadline, though its fetches are parked with one", c.level, id, n.r.role)
			}
		}
	}
}

// quiescedOnN1 is a three-voter log at level 10 led by n1 and idle long
// enough that n2 has quiesced: n1 parks n2's quiescent fetch.
func quiescedOnN1(t *testing.T) (h *harness, n1, n2 *hnode) {
	t.Helper()
	h = newHarness(t)
	h.run(t, "cluster", arg("voters", "n1,n2,n3"), arg("supports", "10"))
	h.run(t, "elect", arg("n1"))
	h.run(t, "run", arg("+3s"))
	n1, n2 = h.node("n1"), h.node("n2")
	if p := n1.r.leader.parkedFrom("n2"); !n2.r.quiesced() || p == nil || !p.quiescent {
		t.Fatalf("setup: n2 quiesced %v, n1 parks %+v for it", n2.r.quiesced(), p)
	}
	return h, n1, n2
}

// TestQuiescentFetchReplacedByAnEarlierLife (R99, R100): a fetch of a
// follower's earlier life (its IDs from another random start), delayed
// past its restart, reaches the leader while the follower's quiescent
// fetch is parked there. It replaces the parked fetch, as a newer one
// would; the leader answers the parked one then, or the follower, which
// waits for it with no deadline while its node hears the leader's, would
// miss every append (nothing was lost, so no resync comes). The next
// append reaches it. (Fails with replog_bug_quiesce_replaced_unanswered.)
func TestQuiescentFetchReplacedByAnEarlierLife(t *testing.T) {
	h, n1, n2 := quiescedOnN1(t)
	old := *n1.r.leader.parkedFrom("n2").req
	old.FetchID += 1 << 40 // another life's IDs
	old.Quiescent, old.FetchOffset, old.LastFetchedEpoch, old.HasDurableOffset = false, 0, 0, false
	h.queue = append(h.queue, protocol.Message{From: "n2", To: "n1", Body: &old})
	h.run(t, "deliver", arg("n2->n1"))
	h.run(t, "run", arg("+1s"))
	h.run(t, "propose", arg("n1"), arg("c"))
	h.run(t, "run", arg("+1s"))
	if leo, want := n2.r.log.LEO(), n1.r.log.LEO(); leo != want {
		t.Fatalf("n2's LEO is %d, the leader's %d: the earlier life's fetch left n2 waiting for its quiescent fetch's answer (quiesced %v, n1 parks %+v for it)",
			leo, want, n2.r.quiesced(), n1.r.leader.parkedFrom("n2"))
	}
}

// TestQuiescentFetchReplacedByItsSuccessor (R99): a parked quiescent
// fetch replaced by the next fetch of the same follower (an ID shortly
// after it: the follower built a new fetch, so it waits for the parked
// one no more) is dropped, not answered. Answered, the follower takes that
// answer for its new fetch (the fetcher's late-answer rule), finds nothing
// new and sends another quiescent fetch, which replaces the one just
// parked, which is answered in turn: a loop of fetches at the speed of the
// network on an idle log. Its way in is any second fetch while a
// quiescent one is parked, as when a parked normal fetch's MaxWait answer
// comes back after the quiescent fetch that followed it was sent.
// Positive control: n2 then parks quiescent again and stays quiet.
func TestQuiescentFetchReplacedByItsSuccessor(t *testing.T) {
	h, n1, n2 := quiescedOnN1(t)
	// n2 sends a second quiescent fetch while the first is parked.
	n2.r.quiesceNext = true
	n2.r.fetch.TimeOut()
	n2.r.maybeFetch()
	h.ready(n2)
	sent := n2.r.quiesceStats.Sent
	h.run(t, "run", arg("+2s"))
	if n := n2.r.quiesceStats.Sent - sent; n > 1 {
		t.Fatalf("n2 sent %d quiescent fetches in 2 s of an idle log after one second fetch: the replaced quiescent fetches were answered, each answer taken for the next fetch", n)
	}
	if p := n1.r.leader.parkedFrom("n2"); !n2.r.quiesced() || p == nil || !p.quiescent {
		t.Fatalf("n2 quiesced %v, n1 parks %+v for it: want a quiescent fetch parked", n2.r.quiesced(), p)
	}
}

// TestContactAnswerEndsQuiescence (R99, R77): a follower whose last fetch
// answer left it caught up (its next fetch would be quiescent) and whose
// contact fetch is then answered with entries past its log end, or an HW
// past it, sends its next fetch as a normal one: the leader holds more,
// and a quiescent fetch follows only an answer that shows nothing new (a
// lost one waits for the heartbeats' counts, R100, where a normal one is
// retried). Positive control: a contact answer that shows nothing new
// leaves the next fetch quiescent. (Fails with
// replog_bug_quiesce_after_contact.)
func TestContactAnswerEndsQuiescence(t *testing.T) {
	for _, c := range []struct {
		name      string
		entries   int
		hwAhead   bool
		quiescent bool
	}{
		{"entries past the log end", 2, false, false},
		{"an HW past the log end", 0, true, false},
		{"nothing new", 0, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.run(t, "cluster", arg("voters", "n1,n2,n3"), arg("supports", "10"))
			h.run(t, "elect", arg("n1"))
			h.run(t, "run", arg("+3s"))
			r := h.node("n2").r
			if !r.quiesced() {
				t.Fatal("setup: n2 is not quiesced")
			}
			r.quiesceNext = true // as after an answer that left it caught up
			leo := r.log.LEO()
			resp := &protocol.FetchResponse{LeaderID: "n1", Epoch: r.epoch, HighWatermark: leo}
			if c.hwAhead {
				resp.HighWatermark = leo + 1
			}
			for i := range c.entries {
				resp.Entries = append(resp.Entries, protocol.Entry{Offset: leo + uint64(i), Epoch: r.epoch, Type: protocol.EntryData, Data: []byte("x")})
			}
			r.applyFetchDecision("n1", resp, fetcher.Decision{Action: fetcher.Contact, HighWatermark: leo})
			if r.quiesceNext != c.quiescent {
				t.Fatalf("after a contact answer with %d entries and HW %d (log end %d), the next fetch is quiescent: %v, want %v",
					len(resp.Entries), resp.HighWatermark, leo, r.quiesceNext, c.quiescent)
			}
		})
	}
}
