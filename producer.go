package replog

import (
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/replog-io/replog/protocol"
)

// producer is what makes a Log an idempotent producer (docs/design.md
// R61-R63): an ID drawn at Open, a sequence number per append (kept
// across its retries), and the lowest sequence number still in flight,
// which every request carries so that the leader may forget the ones
// below it.
type producer struct {
	id uint64

	mu       sync.Mutex
	next     uint64              // the next sequence number (from 1)
	low      uint64              // the lowest in flight, or next if none
	inflight map[uint64]struct{} // begun, not ended
}

func newProducer() *producer {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic("replog: crypto/rand: " + err.Error()) // never fails on supported platforms
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return &producer{id: id, next: 1, low: 1, inflight: make(map[uint64]struct{})}
		}
	}
}

// begin takes the next sequence number for an append, and returns it
// with the key of its first try (caller ID id).
func (p *producer) begin(id string) (uint64, protocol.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.next
	p.next++
	p.inflight[s] = struct{}{}
	return s, protocol.Key{Producer: p.id, Seq: s, Low: p.low, ID: id}
}

// key is the key of one try of append seq (with caller ID id): Low as it
// stands now.
func (p *producer) key(seq uint64, id string) protocol.Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	return protocol.Key{Producer: p.id, Seq: seq, Low: p.low, ID: id}
}

// end records that append seq is answered: it is never tried again.
func (p *producer) end(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.inflight[seq]; !ok {
		return
	}
	delete(p.inflight, seq)
	for p.low < p.next {
		if _, ok := p.inflight[p.low]; ok {
			break
		}
		p.low++
	}
}
