package replog

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/replog-io/replog/protocol"
)

// producer is what makes a Log an idempotent producer (docs/protocol.md
// R61-R63): an ID drawn at Open, a sequence number per append (kept
// across its retries), and the lowest sequence number still in flight,
// which every request carries so that the leader may forget the ones
// below it.
//
// Every append begins and ends once, and with hundreds of appenders
// answered by one round they all begin at once: begin takes no lock (two
// atomics), end flips a bit under mu.
type producer struct {
	id uint64

	next atomic.Uint64 // the next sequence number (from 1)
	low  atomic.Uint64 // the lowest in flight (or next): only end moves it, under mu

	mu sync.Mutex
	// ended is a bitmap of the sequence numbers from base up that have
	// ended (bit s-base, 64 a word; a bit past its end is 0: in flight or
	// not begun); base is low rounded down to a multiple of 64. Sequence
	// numbers are taken in order and mostly end in order, so it is about
	// as long as the appends in flight, and low moves on by bit scans.
	base  uint64
	ended []uint64
}

func newProducer() *producer {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic("replog: crypto/rand: " + err.Error()) // never fails on supported platforms
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			p := &producer{id: id}
			p.next.Store(1)
			p.low.Store(1)
			return p
		}
	}
}

// begin takes the next sequence number for an append, and returns it
// with the key of its first try (caller ID id). Low is read after the
// number is taken: it cannot pass the number before that ends.
func (p *producer) begin(id string) (uint64, protocol.Key) {
	s := p.next.Add(1) - 1
	return s, protocol.Key{Producer: p.id, Seq: s, Low: p.low.Load(), ID: id}
}

// key is the key of one try of append seq (with caller ID id): Low as it
// stands now.
func (p *producer) key(seq uint64, id string) protocol.Key {
	return protocol.Key{Producer: p.id, Seq: seq, Low: p.low.Load(), ID: id}
}

// end records that append seq is answered: it is never tried again.
func (p *producer) end(seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	low := p.low.Load()
	if seq < low || seq >= p.next.Load() {
		return // ended already, or never begun
	}
	i, bit := (seq-p.base)/64, uint64(1)<<((seq-p.base)%64)
	for i >= uint64(len(p.ended)) {
		p.ended = append(p.ended, 0)
	}
	if p.ended[i]&bit != 0 {
		return // ended already
	}
	p.ended[i] |= bit
	if seq != low {
		return
	}
	// Low moves to the next sequence number not ended (in flight, or not
	// begun), and the words wholly below it are dropped.
	for {
		j := (low - p.base) / 64
		if j >= uint64(len(p.ended)) {
			break
		}
		ones := uint64(bits.TrailingZeros64(^(p.ended[j] >> ((low - p.base) % 64))))
		low += ones
		if ones == 0 || (low-p.base)%64 != 0 {
			break // low is in flight
		}
	}
	p.low.Store(low)
	if k := (low - p.base) / 64; k > 0 {
		k = min(k, uint64(len(p.ended)))
		n := copy(p.ended, p.ended[k:])
		clear(p.ended[n:])
		p.ended = p.ended[:n]
		p.base += 64 * k
	}
}
