package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/replog-io/replog/protocol"
)

// errBudgetCut: the connection was cut to keep PartialFrameBudget.
var errBudgetCut = errors.New("replog: connection cut: partial-frame budget exhausted")

// frameBudget accounts the buffers of frames being received over all
// inbound connections of one transport (TCPConfig.PartialFrameBudget).
type frameBudget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	peak    int64
	cuts    uint64
	now     func() time.Time
	holders map[*budgetHolder]struct{}
}

func newFrameBudget(limit int) *frameBudget {
	return &frameBudget{limit: int64(limit), now: time.Now, holders: map[*budgetHolder]struct{}{}}
}

// budgetHolder is one inbound connection's account.
type budgetHolder struct {
	b *frameBudget
	// cut closes the connection; called without b.mu held.
	cut     func()
	charged int64
	// start and end bound the current frame's arrival (end is zero while
	// it is arriving).
	start, end time.Time
	evicted    bool
}

func (b *frameBudget) register(cut func()) *budgetHolder {
	h := &budgetHolder{b: b, cut: cut}
	b.mu.Lock()
	b.holders[h] = struct{}{}
	b.mu.Unlock()
	return h
}

// unregister releases h's charge and forgets it.
func (h *budgetHolder) unregister() {
	b := h.b
	b.mu.Lock()
	b.used -= h.charged
	h.charged = 0
	delete(b.holders, h)
	b.mu.Unlock()
}

// begin starts a new frame: the previous one's buffer is released (its
// message has been delivered or dropped by now).
func (h *budgetHolder) begin() error {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= h.charged
	h.charged = 0
	h.start, h.end = b.now(), time.Time{}
	if h.evicted {
		return errBudgetCut
	}
	return nil
}

// finish marks the current frame complete: its rate stops decaying.
func (h *budgetHolder) finish() {
	b := h.b
	b.mu.Lock()
	h.end = b.now()
	b.mu.Unlock()
}

// release returns h's charge (the frame was dropped).
func (h *budgetHolder) release() {
	b := h.b
	b.mu.Lock()
	b.used -= h.charged
	h.charged = 0
	b.mu.Unlock()
}

// charge grows h's current frame buffer by n bytes. While that would
// exceed the limit, the slowest holder (fewest bytes per second since its
// frame began; on a tie the one holding more) is cut, which may be h
// itself: then charge returns errBudgetCut.
func (h *budgetHolder) charge(n int64) error {
	b := h.b
	b.mu.Lock()
	var victims []*budgetHolder
	for !h.evicted && b.used+n > b.limit {
		v := b.slowestLocked()
		if v == nil {
			// Only h is left and n alone exceeds the limit (Validate
			// keeps limit >= MaxFrameSize, so this is defensive).
			v = h
		}
		b.used -= v.charged
		v.charged = 0
		v.evicted = true
		b.cuts++
		victims = append(victims, v)
	}
	ok := !h.evicted
	if ok {
		b.used += n
		h.charged += n
		b.peak = max(b.peak, b.used)
	}
	b.mu.Unlock()
	for _, v := range victims {
		v.cut()
	}
	if !ok {
		return errBudgetCut
	}
	return nil
}

// slowestLocked returns the holder with the lowest rate among those
// holding bytes, or nil.
func (b *frameBudget) slowestLocked() *budgetHolder {
	now := b.now()
	var best *budgetHolder
	var bestRate float64
	for h := range b.holders {
		if h.charged == 0 || h.evicted {
			continue
		}
		end := h.end
		if end.IsZero() {
			end = now
		}
		elapsed := max(end.Sub(h.start), time.Microsecond)
		rate := float64(h.charged) / elapsed.Seconds()
		if best == nil || rate < bestRate || (rate == bestRate && h.charged > best.charged) {
			best, bestRate = h, rate
		}
	}
	return best
}

// budgetStats returns the bytes charged now, the peak and the number of
// connections cut.
func (b *frameBudget) stats() (used, peak int64, cuts uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.cuts
}

// setClock replaces the budget's clock (tests).
func (b *frameBudget) setClock(now func() time.Time) {
	b.mu.Lock()
	b.now = now
	b.mu.Unlock()
}

// frameReader reads frames like Reader (codec.go), charging each frame's
// buffer to a budgetHolder as it grows, and skipping keepalives (a zero
// length word).
type frameReader struct {
	r       io.Reader
	maxSize int
	hold    *budgetHolder
	hdr     [headerSize]byte
	scratch []byte
	// keepalives counts keepalives read.
	keepalives uint64
}

// read returns the next message. Its buffer stays charged until the
// caller releases it (fr.hold.release) once the message is delivered or
// dropped; the next read releases it too.
// Errors: the stream's (io.EOF between frames), ErrFrameTooLarge,
// ErrBadFrame, errBudgetCut.
func (fr *frameReader) read() (protocol.Message, error) {
	for {
		if _, err := io.ReadFull(fr.r, fr.hdr[:lenSize]); err != nil {
			return protocol.Message{}, err
		}
		if err := fr.hold.begin(); err != nil {
			return protocol.Message{}, err
		}
		n := binary.BigEndian.Uint32(fr.hdr[:])
		if n == 0 {
			fr.keepalives++
			continue
		}
		size := uint64(n) + lenSize
		if size > uint64(fr.maxSize) {
			return protocol.Message{}, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, size, fr.maxSize)
		}
		if size < minFrameSize {
			return protocol.Message{}, fmt.Errorf("%w: frame of %d bytes is below the minimum %d", ErrBadFrame, size, minFrameSize)
		}
		if _, err := io.ReadFull(fr.r, fr.hdr[lenSize:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return protocol.Message{}, err
		}
		m, err := fr.readFrame(int(size))
		if err != nil {
			fr.hold.release()
			return protocol.Message{}, err
		}
		fr.hold.finish()
		return m, nil
	}
}

// readFrame reads the rest of a size-byte frame whose header is in fr.hdr
// and decodes it. Frames whose decoded form aliases the buffer
// (FetchResponse, AppendRequest) get a buffer of their own; the others
// reuse fr.scratch.
func (fr *frameReader) readFrame(size int) (protocol.Message, error) {
	charged := min(size, growStep)
	if err := fr.hold.charge(int64(charged)); err != nil {
		return protocol.Message{}, err
	}
	var buf []byte
	aliases := protocol.KindOf(fr.hdr[lenSize:]).AliasesInput()
	if aliases {
		buf = make([]byte, headerSize, charged)
	} else {
		if cap(fr.scratch) < charged {
			fr.scratch = make([]byte, 0, charged)
		}
		buf = fr.scratch[:headerSize]
	}
	copy(buf, fr.hdr[:])
	for len(buf) < size {
		if len(buf) == cap(buf) {
			next := min(size, 2*cap(buf)+growStep)
			if next > charged {
				if err := fr.hold.charge(int64(next - charged)); err != nil {
					return protocol.Message{}, err
				}
				charged = next
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		end := min(size, cap(buf))
		if _, err := io.ReadFull(fr.r, buf[len(buf):end]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return protocol.Message{}, err
		}
		buf = buf[:end]
	}
	if !aliases {
		if cap(buf) <= scratchLimit {
			fr.scratch = buf[:0]
		} else {
			fr.scratch = nil
		}
	}
	m, _, err := DecodeFrame(buf, fr.maxSize)
	return m, err
}

// keepaliveFrame is what a dialer writes on an idle connection.
var keepaliveFrame = [lenSize]byte{}

// idleReader reads from c with a read deadline of timeout, refreshed
// before a read once a quarter of it has passed (a deadline update per
// read would cost a poller update each): the connection is cut after
// between 3/4 of timeout and timeout without a byte.
type idleReader struct {
	c        net.Conn
	timeout  time.Duration
	deadline time.Time
}

func (r *idleReader) Read(p []byte) (int, error) {
	if now := time.Now(); r.deadline.Sub(now) < r.timeout*3/4 {
		r.deadline = now.Add(r.timeout)
		_ = r.c.SetReadDeadline(r.deadline)
	}
	return r.c.Read(p)
}

// logLimiter allows one log line per reason per interval and counts the
// lines it suppressed in between.
type logLimiter struct {
	mu       sync.Mutex
	interval time.Duration
	now      func() time.Time
	last     map[string]*limitState
}

type limitState struct {
	at         time.Time
	suppressed uint64
}

func newLogLimiter(interval time.Duration) *logLimiter {
	return &logLimiter{interval: interval, now: time.Now, last: map[string]*limitState{}}
}

// allow reports whether a line for reason may be logged now and, if so,
// how many lines for it were suppressed since the last one. reason must
// come from a fixed set (the map is never pruned).
func (l *logLimiter) allow(reason string) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.last[reason]
	if s == nil {
		l.last[reason] = &limitState{at: now}
		return true, 0
	}
	if now.Sub(s.at) < l.interval {
		s.suppressed++
		return false, 0
	}
	suppressed = s.suppressed
	s.at, s.suppressed = now, 0
	return true, suppressed
}

// setClock replaces the limiter's clock (tests).
func (l *logLimiter) setClock(now func() time.Time) {
	l.mu.Lock()
	l.now = now
	l.mu.Unlock()
}
