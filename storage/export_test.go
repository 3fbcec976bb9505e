package storage

import (
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// SetOpenDirHook lets the external tests kill the process at a stage of a
// directory's creation.
func SetOpenDirHook(f func(stage string)) { openDirHook = f }

// SetRollHook lets the external tests stop or kill the process at a stage
// of a roll or a deletion (see rollHook).
func SetRollHook(f func(stage string)) { rollHook = f }

// SetSealedOpenHook lets the external tests hold a reader before it opens
// a sealed segment.
func SetSealedOpenHook(f func(path string)) { sealedOpenHook = f }

// SetSealedReadHook lets the external tests hold a reader that has a
// sealed segment's file open, before it reads it.
func SetSealedReadHook(f func(path string)) { sealedReadHook = f }

// MaxOpenSealed is maxOpenSealed, for the tests.
const MaxOpenSealed = maxOpenSealed

// SegmentFileName is segmentFileName, for the tests.
var SegmentFileName = segmentFileName

// SetActiveNoFreelistSync sets the active segment's NoFreelistSync, for
// the benchmarks that compare both choices; it returns the previous one.
func SetActiveNoFreelistSync(on bool) bool {
	old := activeNoFreelistSync
	activeNoFreelistSync = on
	return old
}

// SetVerifyHook lets the external tests hold the verification that
// follows Open at a stage (see verifyHook).
func SetVerifyHook(f func(stage string)) { verifyHook = f }

// Settle waits until the store's goroutine is idle (with no Apply under
// way): the files of the prefix deletions applied are unlinked then, and
// the next active file asked for is prepared.
func (d *DirStore) Settle() { d.bg.settle() }

// SetDropPacing sets the step and the pause by which the store's goroutine
// shrinks a deleted segment's file before unlinking it (chunk 0: unlinked
// at once), for the benchmarks; it returns a function restoring them.
func SetDropPacing(chunk int64, pause time.Duration) (restore func()) {
	c, p := dropChunk, dropPause
	dropChunk, dropPause = chunk, pause
	return func() { dropChunk, dropPause = c, p }
}

// WriteLegacyDataFile writes at path a data file of the layout from before
// identities and segments (one bbolt file, format 1, no identity record)
// holding ws, for the tests of a legacy directory's adoption and of its
// migration to segments.
func WriteLegacyDataFile(path string, ws []protocol.Write) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), "legacy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, _, err := OpenDir(dir, Identity{ClusterID: "legacy", NodeID: "legacy"}, DirOptions{NoSync: true, SegmentBytes: 1 << 40})
	if err != nil {
		return err
	}
	err = d.Apply(ws)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Before the first roll the active file is format 1: what is left of
	// the layout is the identity record.
	src := filepath.Join(dir, DataFileName)
	db, err := bolt.Open(src, 0o600, &bolt.Options{})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyIdentity) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(src, path)
}

// SetJournalHook sets journalHook (see journal.go).
func SetJournalHook(f func(stage string)) { journalHook = f }

// SetFormatHook sets formatHook (see format.go).
func SetFormatHook(f func(stage string)) { formatHook = f }

// Abandon closes d without the checkpoint Close makes: the journal keeps
// what it holds, as after a crash (the process's writes are all in the
// files: a kill, not a power loss).
func (d *DirStore) Abandon() error {
	d.abandon = true
	return d.Close()
}

// JournalRecordSpans returns the offset and size of each live record of
// the journal file at path.
func JournalRecordSpans(path string) ([][2]int64, error) {
	img, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, recs, _, err := scanJournal(img)
	var out [][2]int64
	for _, r := range recs {
		out = append(out, [2]int64{r.pos, r.size})
	}
	return out, err
}

// EncodeFormat is a format file's contents for format v.
func EncodeFormat(v int) []byte { return encodeFormat(v) }

// HoldRounds makes j's commits queue without a round being written (as if
// one were under way) until release is called: a test then knows which
// requests the next round takes.
func HoldRounds(j *Journal) (release func()) {
	j.mu.Lock()
	j.writing = true
	j.mu.Unlock()
	return func() {
		j.mu.Lock()
		j.handOver()
		j.mu.Unlock()
	}
}

// QueuedRequests is the number of requests waiting for j's next round.
func QueuedRequests(j *Journal) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.queue)
}

// StopCheckpoints stops d's checkpointer: its batches stay in the
// journal (on a shared one, holding the ring) until it is closed.
func (d *DirStore) StopCheckpoints() {
	close(d.ckpt.stop)
	<-d.ckpt.exited
	d.ckpt.stop = nil
}

// SetCompactHook lets the external tests kill the process at a step of a
// compaction pass (see compactHook).
func SetCompactHook(f func(step string)) { compactHook = f }
