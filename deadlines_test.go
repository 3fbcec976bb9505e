package replog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestDeadlinesWakeWhenDue (R97): the scheduler wakes a loop at or after
// its deadline, never before; deadlines within deadlineSlack of each
// other are served by one firing; a removed deadline wakes nothing; a
// deadline earlier than the one armed re-arms the timer.
func TestDeadlinesWakeWhenDue(t *testing.T) {
	s := newDeadlines()
	defer s.close()
	mk := func() (*deadlineEntry, chan struct{}) {
		ch := make(chan struct{}, 1)
		return s.newEntry(ch), ch
	}
	late, lateCh := mk()
	s.set(late, time.Now().Add(time.Hour), time.Now())
	a, aCh := mk()
	b, bCh := mk()
	gone, goneCh := mk()
	now := time.Now()
	at := now.Add(200 * time.Millisecond)
	s.set(a, at, now)
	s.set(b, at.Add(deadlineSlack/2), now)
	s.set(gone, at, now)
	s.set(gone, time.Time{}, now)
	for _, w := range []struct {
		name string
		ch   chan struct{}
		at   time.Time
	}{{"a", aCh, at}, {"b", bCh, at.Add(deadlineSlack / 2)}} {
		select {
		case <-w.ch:
			if now := time.Now(); now.Before(w.at) {
				t.Fatalf("%s woken %v before its deadline", w.name, w.at.Sub(now))
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s not woken a minute after its deadline", w.name)
		}
	}
	select {
	case <-goneCh:
		t.Fatal("a removed deadline woke its loop")
	case <-lateCh:
		t.Fatal("a deadline an hour ahead woke its loop")
	default:
	}
	if n := len(s.queue); n != 1 {
		t.Fatalf("%d entries queued after the firing, want 1 (the one an hour ahead)", n)
	}
}

// TestIdleLogRunsRoundsOnlyAtDeadlines (R97): an idle single-node log
// runs a round only when its core's deadline passes, not every few
// milliseconds, and an append still runs one at once.
func TestIdleLogRunsRoundsOnlyAtDeadlines(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the rounds the append caused are over
	before := l.stats.rounds.Load()
	time.Sleep(500 * time.Millisecond)
	// A 5 ms ticker would run about 100 rounds; the core's deadlines (the
	// HW checkpoint's second, the key sweep's ten) a handful.
	n := l.stats.rounds.Load() - before
	t.Logf("%d rounds in 500ms of idling", n)
	if n > 10 {
		t.Fatalf("an idle log ran %d rounds in 500ms, want a handful", n)
	}
	if _, err := l.Append(ctx, []byte("y")); err != nil {
		t.Fatal(err)
	}
}

// TestDeadlinesLoseNoWakeUp (R97): loops that re-set their deadline after
// every wake-up, as the event loop does (the same deadline again while it
// is ahead; once it passed, a new one or now and then the same one, a
// core term that is due), some rounds with a wake-up already pending on
// the same channel (the writer's "persisted") while the timer fires
// concurrently, are each woken at or after every deadline they set: none
// is left waiting with its deadline passed and no wake-up to come.
func TestDeadlinesLoseNoWakeUp(t *testing.T) {
	s := newDeadlines()
	defer s.close()
	const loops, rounds = 10, 50
	errs := make(chan error, loops)
	for i := range loops {
		wake := make(chan struct{}, 1)
		e := s.newEntry(wake)
		go func() {
			now := time.Now()
			at := now.Add(time.Duration(i%5) * 200 * time.Microsecond)
			for n, done := 0, 0; done < rounds; n++ {
				s.set(e, at, now)
				if n%3 == i%3 {
					select { // the writer's wake-up, pending
					case wake <- struct{}{}:
					default:
					}
				}
				select {
				case <-wake:
				case <-time.After(time.Minute):
					errs <- fmt.Errorf("loop %d: no wake-up a minute after its deadline %v (round %d)", i, at, done)
					return
				}
				if now = time.Now(); !now.Before(at) {
					if done++; done%4 != 0 {
						at = now.Add(time.Duration((i+done)%5) * 200 * time.Microsecond)
					}
				}
			}
			errs <- nil
		}()
	}
	for range loops {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
