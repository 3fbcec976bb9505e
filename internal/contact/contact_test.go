package contact

import (
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

var t0 = time.Unix(1000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var (
	plain = protocol.Message{Body: &protocol.BeginEpoch{}}
	qfe   = protocol.Message{Body: &protocol.FetchRequest{Quiescent: true}}
)

// TestDueAndSilent: a heartbeat is due to an enabled peer sent nothing
// for the interval, never to a disabled one; a peer heard nothing from
// for the timeout is reported silent once, until heard again.
func TestDueAndSilent(t *testing.T) {
	c := New(1, 150*time.Millisecond, 700*time.Millisecond)
	c.Enable("b", true, at(0))
	c.Enable("c", false, at(0))
	c.Sent("b", plain, at(0))
	c.Sent("c", plain, at(0))
	if d := c.Due(at(149)); len(d) != 0 {
		t.Fatalf("due at 149ms: %v", d)
	}
	if d := c.Due(at(150)); len(d) != 1 || d[0] != "b" {
		t.Fatalf("due at 150ms: %v, want [b]", d)
	}
	if n := c.NextDue(); !n.Equal(at(150)) {
		t.Fatalf("NextDue %v", n)
	}
	c.Heard("b", plain, at(100))
	if s := c.Silent(at(799)); len(s) != 0 {
		t.Fatalf("silent at 799ms: %v", s)
	}
	if s := c.Silent(at(800)); len(s) != 1 || s[0] != "b" {
		t.Fatalf("silent at 800ms: %v, want [b]", s)
	}
	if s := c.Silent(at(900)); len(s) != 0 {
		t.Fatalf("reported twice: %v", s)
	}
	c.Heard("b", plain, at(950))
	if s := c.Silent(at(1650)); len(s) != 1 {
		t.Fatalf("heard again, then silent: %v", s)
	}
}

// TestLostQuiescentMessage: a quiescent message sent before the
// sender's previous heartbeat that never arrived makes the receiver
// resync and ask the sender to (R100); one still on its way when the
// heartbeat after it arrives does not; a new session starts the counts
// over.
func TestLostQuiescentMessage(t *testing.T) {
	a := New(1, 150*time.Millisecond, 700*time.Millisecond)
	b := New(2, 150*time.Millisecond, 700*time.Millisecond)
	a.Enable("b", true, at(0))
	b.Enable("a", true, at(0))
	hb := func() *protocol.Heartbeat { return a.Heartbeat("b") }

	a.Sent("b", qfe, at(1)) // delivered late: not yet counted at b
	if b.OnHeartbeat("a", hb()) {
		t.Fatal("a message still on its way counted as lost")
	}
	b.Heard("a", qfe, at(2))
	if b.OnHeartbeat("a", hb()) {
		t.Fatal("a delivered message counted as lost")
	}
	a.Sent("b", qfe, at(3)) // lost
	if b.OnHeartbeat("a", hb()) {
		t.Fatal("lost counted before the next heartbeat")
	}
	if !b.OnHeartbeat("a", hb()) {
		t.Fatal("a lost quiescent message not found")
	}
	if back := b.Heartbeat("a"); !back.Resync {
		t.Fatal("the peer is not asked to resync")
	}
	if b.Heartbeat("a").Resync || b.OnHeartbeat("a", hb()) {
		t.Fatal("resync asked twice for one loss")
	}
	a2 := New(3, 150*time.Millisecond, 700*time.Millisecond) // a restarted
	if b.OnHeartbeat("a", a2.Heartbeat("b")) {
		t.Fatal("a new session counted as loss")
	}
}
