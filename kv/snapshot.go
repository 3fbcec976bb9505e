package kv

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/kvstate"
)

// A KV's snapshot is
//
//	'K' 'V' 'S' version  record*  uvarint(0)
//
// where each record is uvarint(len(key)) key, a flags byte (1: deleted),
// uvarint(revision), uvarint(len(value)) value, uvarint(len(revs)) and
// each revision as a uvarint; records are sorted by key, so that two
// nodes with the same state write the same bytes. version is 1.
const snapshotVersion = 1

var snapshotMagic = []byte{'K', 'V', 'S', snapshotVersion}

// errNotKVSnapshot: the Log's snapshot was not written by a KV.
var errNotKVSnapshot = errors.New("replog: kv: the log's snapshot is not a kv snapshot")

// restore loads the Log's newest snapshot into k (an empty state at 0
// when there is none).
func (k *KV) restore() error {
	info, r, err := k.log.OpenSnapshot()
	if errors.Is(err, replog.ErrNoSnapshot) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replog: kv: open the snapshot: %w", err)
	}
	defer r.Close()
	if err := k.load(bufio.NewReader(r)); err != nil {
		return fmt.Errorf("replog: kv: snapshot %s: %w", info.Path, err)
	}
	k.next = info.Offset
	k.stats.Restored = info.Offset
	return nil
}

// load reads a snapshot to its end: only a read that ends in io.EOF
// proves the snapshot's checksum matched.
func (k *KV) load(r *bufio.Reader) error {
	head := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, head); err != nil {
		return fmt.Errorf("%w: %w", errNotKVSnapshot, err)
	}
	if string(head) != string(snapshotMagic) {
		return errNotKVSnapshot
	}
	uv := func() (uint64, error) {
		v, err := binary.ReadUvarint(r)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return v, err
	}
	bytes := func(n uint64) ([]byte, error) {
		// Read in pieces, so that a damaged length allocates no more than
		// the snapshot holds.
		var b []byte
		for n > 0 {
			c := min(n, 1<<16)
			p := make([]byte, c)
			if _, err := io.ReadFull(r, p); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			b = append(b, p...)
			n -= c
		}
		return b, nil
	}
	for {
		kl, err := uv()
		if err != nil {
			return err
		}
		if kl == 0 {
			break
		}
		if kl > MaxKeyBytes {
			return fmt.Errorf("%w: a key of %d bytes", errNotKVSnapshot, kl)
		}
		key, err := bytes(kl)
		if err != nil {
			return err
		}
		flags, err := r.ReadByte()
		if err != nil {
			return err
		}
		rec := &kvstate.Record{Deleted: flags&1 != 0}
		if rec.Rev, err = uv(); err != nil {
			return err
		}
		vl, err := uv()
		if err != nil {
			return err
		}
		if rec.Value, err = bytes(vl); err != nil {
			return err
		}
		n, err := uv()
		if err != nil {
			return err
		}
		for range n {
			rev, err := uv()
			if err != nil {
				return err
			}
			rec.Revs = append(rec.Revs, rev)
		}
		k.state[string(key)] = rec
	}
	if _, err := r.ReadByte(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("%w: bytes after its end", errNotKVSnapshot)
		}
		return err
	}
	return nil
}

// maybeSnapshot saves a snapshot when Options.SnapshotEvery* says one is
// due. It runs on the apply loop, which alone changes the state, so the
// state holds still while it streams.
func (k *KV) maybeSnapshot(ctx context.Context) {
	due := k.opts.SnapshotEveryEntries > 0 && k.sinceEntries >= k.opts.SnapshotEveryEntries ||
		k.opts.SnapshotEveryBytes > 0 && k.sinceBytes >= k.opts.SnapshotEveryBytes
	if !due || k.next == k.lastSnap {
		return
	}
	k.sinceEntries, k.sinceBytes = 0, 0
	k.trim()
	_, err := k.log.SaveSnapshot(ctx, k.next, k.writeSnapshot)
	k.mu.Lock()
	if err != nil {
		k.stats.SnapshotErrors++
	} else {
		k.stats.Snapshots++
		k.lastSnap = k.next
	}
	k.mu.Unlock()
	if err != nil && ctx.Err() == nil && !errors.Is(err, replog.ErrClosed) {
		k.opts.Logger.Warn("kv: snapshot failed", "offset", k.next, "error", err)
	}
}

// trim forgets the revisions below the log start (their entries are
// gone), but each key's current one, and the deleted keys with none
// left. It runs on the apply loop.
func (k *KV) trim() {
	ls := k.log.Status().LogStart
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, r := range k.state {
		r.Revs = slices.DeleteFunc(r.Revs, func(rev uint64) bool { return rev < ls && rev != r.Rev })
		if r.Deleted && r.Rev < ls {
			delete(k.state, key)
		}
	}
}

// writeSnapshot streams the state. It runs on the apply loop (see
// maybeSnapshot), so it reads the state without the lock.
func (k *KV) writeSnapshot(w io.Writer) error {
	bw := bufio.NewWriter(w)
	keys := make([]string, 0, len(k.state))
	for key := range k.state {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	bw.Write(snapshotMagic)
	var buf []byte
	for _, key := range keys {
		r := k.state[key]
		buf = binary.AppendUvarint(buf[:0], uint64(len(key)))
		buf = append(buf, key...)
		flags := byte(0)
		if r.Deleted {
			flags = 1
		}
		buf = append(buf, flags)
		buf = binary.AppendUvarint(buf, r.Rev)
		buf = binary.AppendUvarint(buf, uint64(len(r.Value)))
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		if _, err := bw.Write(r.Value); err != nil {
			return err
		}
		buf = binary.AppendUvarint(buf[:0], uint64(len(r.Revs)))
		for _, rev := range r.Revs {
			buf = binary.AppendUvarint(buf, rev)
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	bw.WriteByte(0)
	return bw.Flush()
}
