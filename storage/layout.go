package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// The layout of a segment file (docs/storage.md): every segment
// of a data directory is a bbolt file with these buckets; the active one
// also holds the log's small state (meta, epochs, voters, quorum, and in
// format 2 the sealed segments' table, segfile.go).

// Bucket and key names of a segment file.
var (
	bucketEntries = []byte("entries") // 8-byte BE offset → entry value (codec.go)
	bucketEpochs  = []byte("epochs")  // 8-byte BE epoch → 8-byte BE start offset
	bucketQuorum  = []byte("quorum")  // keyQuorum → quorum state (codec.go)
	bucketMeta    = []byte("meta")
	// bucketVoters: 8-byte BE offset of an EntryVoters entry → its voter
	// set (codec.go). Files from before voter sets lack it until the first
	// write of a row creates it.
	bucketVoters = []byte("voters")

	keyQuorum   = []byte("state")
	keyFormat   = []byte("format")    // 1 byte: boltFormat
	keyLogStart = []byte("log_start") // 8-byte BE
	keyHW       = []byte("hw")        // 8-byte BE, absent until first checkpoint
	keyIdentity = []byte("identity")  // the directory's identity (identity.go), absent in a directory from before identities
)

// boltFormat is the format of an active segment that has never rolled: a
// whole log in one file, base 0 and no sealed segments (a data directory
// until its first roll; boltFormatSegmented after it).
const boltFormat = 1

// putWrite writes w into tx, the transaction of the active segment whose
// entries bucket is eb; w is valid against st and turns it into next. log
// receives the warning of a truncation below the HW checkpoint.
func putWrite(tx *bolt.Tx, eb *bolt.Bucket, st, next *logState, w *protocol.Write, vals [][]byte, log hclog.Logger) error {
	switch w.Kind {
	case protocol.WriteAppend:
		if vals != nil {
			// Encoded once, for the journal: put as they are (bbolt keeps
			// them until commit; the journal's batch holds them).
			keys := make([]byte, 8*len(w.Entries))
			for i := range w.Entries {
				k := keys[8*i : 8*i+8 : 8*i+8]
				binary.BigEndian.PutUint64(k, w.Entries[i].Offset)
				if err := eb.Put(k, vals[i]); err != nil {
					return err
				}
			}
			if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
				return err
			}
			return writeVoters(tx, st.voters, next.voters)
		}
		// bbolt keeps the key and value slices until commit: one buffer
		// each for the whole write.
		size := 0
		for i := range w.Entries {
			size += encodedEntrySize(&w.Entries[i])
		}
		keys := make([]byte, 8*len(w.Entries))
		vals := make([]byte, 0, size)
		for i := range w.Entries {
			e := &w.Entries[i]
			k := keys[8*i : 8*i+8 : 8*i+8]
			binary.BigEndian.PutUint64(k, e.Offset)
			start := len(vals)
			vals = appendEntry(vals, e)
			if err := eb.Put(k, vals[start:len(vals):len(vals)]); err != nil {
				return err
			}
		}
		if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
			return err
		}
		return writeVoters(tx, st.voters, next.voters)
	case protocol.WriteTruncate:
		c := eb.Cursor()
		from := u64key(w.Offset)
		for k, _ := c.Seek(from); k != nil; k, _ = c.Seek(from) {
			// Re-seek after each Delete: bbolt's cursor skips a key otherwise.
			if err := c.Delete(); err != nil {
				return err
			}
		}
		if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
			return err
		}
		if err := writeVoters(tx, st.voters, next.voters); err != nil {
			return err
		}
		if next.hw != st.hw {
			log.Warn("truncation below the HW checkpoint; checkpoint lowered", "hw", st.hw, "to", next.hw)
			return tx.Bucket(bucketMeta).Put(keyHW, u64key(next.hw))
		}
		return nil
	case protocol.WriteDeletePrefix:
		if err := tx.Bucket(bucketMeta).Put(keyLogStart, u64key(w.Offset)); err != nil {
			return err
		}
		if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
			return err
		}
		return writeVoters(tx, st.voters, next.voters)
	case protocol.WriteQuorumState:
		return tx.Bucket(bucketQuorum).Put(keyQuorum, encodeQuorumState(w.Quorum))
	case protocol.WriteHWCheckpoint:
		return tx.Bucket(bucketMeta).Put(keyHW, u64key(w.Offset))
	}
	return fmt.Errorf("storage: unknown write kind %v", w.Kind) // after refuses these first
}

// writeEpochs turns the epoch map on disk from old into cur.
func writeEpochs(tx *bolt.Tx, old, cur []protocol.EpochStart) error {
	if len(old) == len(cur) && (len(old) == 0 || (&old[0] == &cur[0])) {
		return nil // unchanged (published slices are never mutated)
	}
	eb := tx.Bucket(bucketEpochs)
	keep := make(map[uint64]uint64, len(cur))
	for _, r := range cur {
		keep[r.Epoch] = r.StartOffset
	}
	for _, r := range old {
		s, ok := keep[r.Epoch]
		if ok && s == r.StartOffset {
			delete(keep, r.Epoch)
			continue
		}
		if !ok {
			if err := eb.Delete(u64key(r.Epoch)); err != nil {
				return err
			}
		}
	}
	for e, s := range keep {
		if err := eb.Put(u64key(e), u64key(s)); err != nil {
			return err
		}
	}
	return nil
}

// writeVoters turns the voter-set rows on disk from old into cur; it
// creates the bucket in a file from before voter sets.
func writeVoters(tx *bolt.Tx, old, cur []protocol.VotersAt) error {
	if len(old) == len(cur) && (len(old) == 0 || &old[0] == &cur[0]) {
		return nil // unchanged (published slices are never mutated)
	}
	vb, err := tx.CreateBucketIfNotExists(bucketVoters)
	if err != nil {
		return err
	}
	// A row is the same row if it holds the same set (published sets are
	// never mutated, so the same backing array); sets are never empty.
	had := make(map[uint64]*protocol.Voter, len(old))
	for _, r := range old {
		had[r.Offset] = &r.Voters[0]
	}
	for _, r := range cur {
		if had[r.Offset] == &r.Voters[0] {
			delete(had, r.Offset)
			continue
		}
		if err := vb.Put(u64key(r.Offset), encodeVotersRow(r)); err != nil {
			return err
		}
		delete(had, r.Offset) // overwritten
	}
	for off := range had {
		if err := vb.Delete(u64key(off)); err != nil {
			return err
		}
	}
	return nil
}

// readVoters reads the voter-set rows of tx's file (none in a file from
// before voter sets); a row that does not decode is ErrCorrupt naming its
// offset.
func readVoters(tx *bolt.Tx) ([]protocol.VotersAt, error) {
	vb := tx.Bucket(bucketVoters)
	if vb == nil {
		return nil, nil
	}
	var rows []protocol.VotersAt
	err := vb.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("%w: voter-set row key of %d bytes", ErrCorrupt, len(k))
		}
		off := binary.BigEndian.Uint64(k)
		row, err := decodeVotersRow(off, v)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	})
	return rows, err
}

// pagesWritten is the number of pages db has written since it was opened
// (meta pages included).
func pagesWritten(db *bolt.DB) uint64 {
	st := db.Stats()
	return uint64(st.TxStats.GetWrite())
}
