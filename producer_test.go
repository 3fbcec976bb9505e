package replog

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestProducerLow: Low is the lowest sequence number still in flight (the
// leader forgets the ones below, R63), so it never passes an append that
// may still be retried, and it moves on once the lowest ends.
func TestProducerLow(t *testing.T) {
	p := newProducer()
	s1, k1 := p.begin("")
	s2, _ := p.begin("x")
	s3, k3 := p.begin("")
	if k1.Low != 1 || k3.Low != 1 || s1 != 1 || s2 != 2 || s3 != 3 || k1.Producer == 0 {
		t.Fatalf("keys %+v %+v", k1, k3)
	}
	p.end(s2)
	if k := p.key(s3, ""); k.Low != 1 {
		t.Fatalf("Low passed the unanswered seq 1: %+v", k)
	}
	p.end(s1)
	if k := p.key(s3, ""); k.Low != 3 {
		t.Fatalf("Low %d after 1 and 2 ended, want 3", k.Low)
	}
	p.end(s3)
	p.end(s3) // twice is harmless
	if _, k := p.begin(""); k.Low != 4 || k.Seq != 4 {
		t.Fatalf("after all ended: %+v", k)
	}
}

// TestProducerLowModel checks Low against a set of the sequence numbers in
// flight, over random orders of ends (some twice), windows that span
// several bitmap words, and appends that stay in flight long.
func TestProducerLowModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		p := newProducer()
		inflight := map[uint64]bool{}
		var open []uint64
		for range 2000 {
			if len(open) == 0 || rng.IntN(100) < 52 {
				s, k := p.begin("")
				if s != k.Seq || inflight[s] {
					t.Fatalf("round %d: begin gave %d (key %+v)", round, s, k)
				}
				inflight[s] = true
				open = append(open, s)
			} else {
				// Mostly the older ones first, now and then a random one
				// (an append that stays in flight long).
				i := rng.IntN(min(len(open), 3))
				if rng.IntN(10) == 0 {
					i = rng.IntN(len(open))
				}
				s := open[i]
				open = append(open[:i], open[i+1:]...)
				delete(inflight, s)
				p.end(s)
				if rng.IntN(5) == 0 {
					p.end(s) // twice is harmless
				}
			}
			want := p.next.Load()
			for s := range inflight {
				want = min(want, s)
			}
			if k := p.key(1, ""); k.Low != want {
				t.Fatalf("round %d: Low %d, want %d (in flight %v)", round, k.Low, want, open)
			}
		}
	}
}

// TestProducerConcurrent: begin takes no lock, so appenders racing (run
// with -race) still get distinct sequence numbers, every key's Low stays
// at or below its own number, and once all have ended Low is next.
func TestProducerConcurrent(t *testing.T) {
	p := newProducer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[uint64]bool{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				s, k := p.begin("")
				if k.Low > s {
					t.Errorf("Low %d above its own sequence number %d", k.Low, s)
				}
				mu.Lock()
				dup := seen[s]
				seen[s] = true
				mu.Unlock()
				if dup {
					t.Errorf("sequence number %d taken twice", s)
				}
				p.end(s)
			}
		}()
	}
	wg.Wait()
	if low, next := p.low.Load(), p.next.Load(); low != next || next != 16001 {
		t.Fatalf("after all ended: low %d next %d, want both 16001", low, next)
	}
}
