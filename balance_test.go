package replog

import (
	"testing"
	"time"
)

// TestBalanceStateBacksOff: a log handed to its preferred leader is not
// handed over again within the hold after the hand-over; a hand-over
// undone within twice the hold (the log came back) doubles the hold, up
// to balanceBackoffMax; one that held resets it.
func TestBalanceStateBacksOff(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var b balanceState
	if !b.due(t0) {
		t.Fatal("a log never handed over is not due")
	}
	b.moved(t0)
	if b.backoff != 0 {
		t.Fatalf("first hand-over: backoff %v, want 0", b.backoff)
	}
	if b.due(t0.Add(balanceBackoffMin - time.Millisecond)) {
		t.Fatal("due within the hold after a hand-over")
	}
	// Back within twice the hold: undone, the hold doubles each time.
	now := t0.Add(balanceBackoffMin)
	if !b.due(now) {
		t.Fatal("not due once the hold ended")
	}
	want := 2 * balanceBackoffMin
	for i := 0; i < 10; i++ {
		b.moved(now)
		if b.backoff != want {
			t.Fatalf("hand-over %d undone at once: backoff %v, want %v", i+2, b.backoff, want)
		}
		if b.due(now.Add(b.backoff - time.Millisecond)) {
			t.Fatalf("hand-over %d: due before its backoff %v ended", i+2, b.backoff)
		}
		now = now.Add(b.backoff)
		want = min(2*want, balanceBackoffMax)
	}
	if b.backoff != balanceBackoffMax {
		t.Fatalf("backoff %v after many undone hand-overs, want the cap %v", b.backoff, balanceBackoffMax)
	}
	// A hand-over that held for longer than twice the hold resets it.
	now = now.Add(2*b.backoff + time.Second)
	b.moved(now)
	if b.backoff != 0 || b.due(now.Add(balanceBackoffMin-time.Millisecond)) || !b.due(now.Add(balanceBackoffMin)) {
		t.Fatalf("after a hand-over that held: backoff %v, want 0 and the minimum hold", b.backoff)
	}
}
