package simulation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/replog-io/replog/internal/kvstate"
	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
)

// The KV in the simulation (docs/architecture.md R90, R91, R105). In
// compaction runs (compaction.go) some appends are KV operations, encoded
// and keyed as the kv package appends them (internal/kvstate): a Put
// carries its key's entry key, a Delete is a tombstone, a Create or an
// Update (in runs with conditional writes) carries none and names the
// revision the proposing node's service last saw, or a stale one. Every
// node's service (snapshot.go) applies what its reader sees through
// kvstate.State.Apply, the one definition the kv package applies, beside
// its count and hash of the entries without a key, and saves and
// restores the KV state in its snapshots.
//
// Checks:
//   - The reference (the committed log replayed through State.Apply) is
//     checked against a model of its own: an Update succeeds exactly when
//     its key's revision at its offset is the one it names (0: no value),
//     a Create exactly when the key has no value (R90).
//   - Every node decides every conditional write alike: as the reference
//     does, unless its reader passed over a hole of that key since its
//     state was last known whole (then the key's state before the write
//     may differ; the next Put or Delete of the key makes it whole again).
//   - A node's KV state (keys, values and revisions with a value) is the
//     reference's at its offset whenever its reader passed over no hole
//     of a KV key that no later write of the key repaired: whether it
//     replayed everything, restored a snapshot and read on, or caught up
//     across a compacted range (R105). Snapshots are saved only then.

// kvRef is the KV's reference: the committed log replayed.
type kvRef struct {
	st kvstate.State
	// digest[o] is the digest of the state below offset o.
	digest []uint64
	// ok[o]: the conditional write at o succeeded (only conditional
	// offsets are present).
	ok map[uint64]bool
	// model: each key's revision by the checker's own account (absent: no
	// value).
	model map[string]uint64
}

func newKVRef() kvRef {
	return kvRef{st: kvstate.State{}, digest: []uint64{kvDigest(kvstate.State{})}, ok: map[uint64]bool{}, model: map[string]uint64{}}
}

// kvProposal turns p into a KV operation on nd's view of a random key.
func (s *sim) kvProposal(nd *node, p *proposal) (shell.Event, bool) {
	r := s.kc.rng
	key := fmt.Sprintf("k%d", r.Intn(s.kc.p.keys))
	o := kvstate.Operation{Request: p.id, Key: key, Value: fmt.Appendf(nil, "v%d", p.id)}
	n := 2
	if s.kc.p.conditional {
		n = 5
	}
	switch r.Intn(n) {
	case 0:
		o.Op = kvstate.OpPut
		p.entryKey = kvstate.EntryKey(key)
	case 1:
		// A Delete is a tombstone (R105).
		p.entryKey = kvstate.EntryKey(key)
		return s.keyedEvent(p, [][]byte{{}}), true
	case 2:
		o.Op = kvstate.OpCreate
	default:
		o.Op = kvstate.OpUpdate
		if nd.snap.appOK {
			o.Expected = nd.snap.kv.Revision(key)
		}
		if r.Intn(4) == 0 && o.Expected > 0 {
			o.Expected -= uint64(1 + r.Intn(int(o.Expected)))
		}
	}
	return s.keyedEvent(p, [][]byte{kvstate.Encode(o)}), true
}

// kvDigest is a digest of a KV state: its keys with a value, each with
// its revision and value, in key order (what R105 says a replay keeps; the
// revisions a node still lists and the deleted keys it remembers differ
// with what its log still holds).
func kvDigest(st kvstate.State) uint64 {
	h := fnv.New64a()
	h.Write(kvBody(st))
	return h.Sum64()
}

// kvBody encodes a KV state for a snapshot body, canonically: for each
// key with a value, in key order, uvarint(len(key)) key uvarint(revision)
// uvarint(len(value)) value. Empty for an empty state.
func kvBody(st kvstate.State) []byte {
	keys := make([]string, 0, len(st))
	for k, r := range st {
		if r.Live() {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b []byte
	for _, k := range keys {
		r := st[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, r.Rev)
		b = binary.AppendUvarint(b, uint64(len(r.Value)))
		b = append(b, r.Value...)
	}
	return b
}

// decodeKVBody is kvBody's inverse; ok is false for bytes it did not make.
func decodeKVBody(b []byte) (kvstate.State, bool) {
	st := kvstate.State{}
	all := b
	for len(b) > 0 {
		kl, n := binary.Uvarint(b)
		if n <= 0 || kl > uint64(len(b)-n) {
			return nil, false
		}
		k := string(b[n : n+int(kl)])
		b = b[n+int(kl):]
		rev, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, false
		}
		b = b[n:]
		vl, n := binary.Uvarint(b)
		if n <= 0 || vl > uint64(len(b)-n) {
			return nil, false
		}
		st[k] = &kvstate.Record{Value: slices.Clone(b[n : n+int(vl)]), Rev: rev, Revs: []uint64{rev}}
		b = b[n+int(vl):]
	}
	return st, bytes.Equal(kvBody(st), all)
}

// kvRefAt is the reference's digest at offset o (at most the committed
// log's length), replaying the committed log that far.
func (s *sim) kvRefAt(o uint64) uint64 {
	ref := &s.snap.kv
	for uint64(len(ref.digest)) <= o && s.err == nil {
		at := uint64(len(ref.digest) - 1)
		k := s.committed[at]
		if k.typ == protocol.EntryData {
			s.kvRefApply(at, k)
		}
		ref.digest = append(ref.digest, kvDigest(ref.st))
	}
	return ref.digest[min(o, uint64(len(ref.digest)-1))]
}

// kvRefApply applies the committed entry k at o to the reference and
// checks the outcome against the checker's own model (R90).
func (s *sim) kvRefApply(o uint64, k entryKey) {
	ref := &s.snap.kv
	out := ref.st.Apply(o, k.key, []byte(k.data))
	if out.Skipped != nil {
		return
	}
	cur, has := ref.model[out.Key]
	switch out.Op {
	case kvstate.OpPut:
		ref.model[out.Key] = o
	case kvstate.OpDelete:
		delete(ref.model, out.Key)
	case kvstate.OpCreate, kvstate.OpUpdate:
		want := !has
		if out.Op == kvstate.OpUpdate {
			op, _ := kvstate.DecodeEntry(k.key, []byte(k.data))
			want = cur == op.Expected
			var m *kvstate.RevisionMismatchError
			if errors.As(out.Failed, &m) && m.Current != cur {
				s.fail("the KV's Update at %d of key %q says the key was at revision %d; it was at %d", o, out.Key, m.Current, cur)
				return
			}
			if want != (out.Failed == nil) {
				s.fail("the KV's Update at %d of key %q named revision %d; the key was at %d, yet it %s (R90: an Update succeeds only against the revision it names)",
					o, out.Key, op.Expected, cur, map[bool]string{true: "succeeded", false: "failed"}[out.Failed == nil])
				return
			}
		}
		if want != (out.Failed == nil) {
			s.fail("the KV's Create at %d of key %q: the key had a value %v, yet it %v (R90)", o, out.Key, has, out.Failed)
			return
		}
		ref.ok[o] = want
		if want {
			ref.model[out.Key] = o
			s.res.Faults.KVConditionalOK++
		} else {
			s.res.Faults.KVConditionalFailed++
		}
	}
}

// kvPassed notes the offsets [from, to) that nd's service's reader passed
// over: a hole of a KV key leaves the key's state unknown until the next
// Put or Delete of it.
func (s *sim) kvPassed(nd *node, from, to uint64) {
	for o := from; o < to && o < uint64(len(s.committed)); o++ {
		k := s.committed[o]
		if k.typ != protocol.EntryData {
			continue
		}
		// A data entry the reader passed over is a hole.
		s.res.Faults.HolesRead++
		if op, err := kvstate.DecodeEntry(k.key, []byte(k.data)); err == nil {
			if nd.snap.kvSkip == nil {
				nd.snap.kvSkip = map[string]bool{}
			}
			nd.snap.kvSkip[op.Key] = true
		}
	}
}

// kvApply applies the entry e (entry key key) nd's service read, and
// checks a conditional write's outcome against the reference's.
func (s *sim) kvApply(nd *node, e protocol.Entry, key string) {
	sn := &nd.snap
	out := sn.kv.Apply(e.Offset, key, e.Data)
	if out.Skipped != nil {
		return
	}
	if out.Op.Conditional() && !sn.kvSkip[out.Key] && e.Offset < uint64(len(s.committed)) {
		s.kvRefAt(e.Offset + 1)
		if want := s.snap.kv.ok[e.Offset]; want != (out.Failed == nil) {
			s.fail("%s: decides the KV's %v at %d of key %q unlike the committed log does (succeeded %v, want %v): every node decides a conditional write alike (R90)",
				nd.id, out.Op, e.Offset, out.Key, out.Failed == nil, want)
		}
		return
	}
	if out.Op == kvstate.OpPut || out.Op == kvstate.OpDelete {
		delete(sn.kvSkip, out.Key) // an unconditional write decides the key's state
	}
}

// kvCheck compares nd's KV state with the reference at its offset, when
// its reader passed over no hole that left a key unknown (R105).
func (s *sim) kvCheck(nd *node) {
	sn := &nd.snap
	if !s.kc.p.on || len(sn.kvSkip) > 0 || sn.app.at > uint64(len(s.committed)) {
		return // (no KV operation is ever appended without the workload)
	}
	if got, want := kvDigest(sn.kv), s.kvRefAt(sn.app.at); got != want {
		s.fail("%s: its KV state at %d differs from the committed log's replay there (R105): %x, want %x", nd.id, sn.app.at, kvBody(sn.kv), kvBody(s.snap.kv.stateAt(s, sn.app.at)))
	}
}

// stateAt replays the committed log below o into a new state, for a
// failure's message.
func (ref *kvRef) stateAt(s *sim, o uint64) kvstate.State {
	st := kvstate.State{}
	for i := uint64(0); i < o && i < uint64(len(s.committed)); i++ {
		if k := s.committed[i]; k.typ == protocol.EntryData {
			st.Apply(i, k.key, []byte(k.data))
		}
	}
	return st
}
