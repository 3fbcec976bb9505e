package replog

import "testing"

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
