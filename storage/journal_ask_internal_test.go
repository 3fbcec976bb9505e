package storage

import (
	"hash/crc32"
	"maps"
	"path/filepath"
	"sync"
	"testing"
)

// Once a quarter of a shared journal is live, a round asks for
// checkpoints only the stores whose batches hold the cut back: those
// with a batch in the oldest record still needed. A checkpoint of any
// other store would cut nothing (the front record stays) and costs a
// bbolt commit; asking all of them, as many logs on one journal do
// every round past the quarter, multiplies the checkpoints by the logs.
func TestJournalAsksOnlyTheStoresHoldingTheCut(t *testing.T) {
	j, err := OpenJournal(filepath.Join(t.TempDir(), "j"), JournalOptions{Bytes: minJournalBytes, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	asks := map[uint32]int{} // written under j.mu, by the test's own commits
	for id := uint32(1); id <= 4; id++ {
		d := &DirStore{}
		d.cond = sync.NewCond(&d.mu)
		if _, err := j.attach(id, d, func() { asks[id]++ }); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for id := uint32(1); id <= 4; id++ {
			j.detach(id, nil)
		}
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	}()
	req := func(id uint32) *journalReq {
		const n = 1000
		rec := make([]byte, recordSize(n))
		p := rec[journalRecHeader : journalRecHeader+n]
		for i := range p {
			p[i] = byte(id)
		}
		return &journalReq{logID: id, rec: rec, n: n, crc: crc32.Checksum(p, castagnoli)}
	}
	commit := func(reqs ...*journalReq) uint64 {
		t.Helper()
		if err := j.commitAll(reqs); err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if r.err != nil {
				t.Fatal(r.err)
			}
		}
		return reqs[0].seq
	}
	// fillTo commits batches of logs 3 and 4 in turn until a quarter of
	// the journal is live, and returns who the rounds asked.
	fillTo := func() map[uint32]int {
		t.Helper()
		clear(asks)
		for k := 0; j.Live() < j.Capacity()/4; k++ {
			commit(req(uint32(3 + k%2)))
		}
		return maps.Clone(asks)
	}
	check := func(what string, got map[uint32]int, want ...uint32) {
		t.Helper()
		for id := uint32(1); id <= 4; id++ {
			wanted := false
			for _, w := range want {
				wanted = wanted || w == id
			}
			if wanted && got[id] == 0 {
				t.Errorf("%s: store %d, whose batch is in the front record, was not asked for a checkpoint (asks %v)", what, id, got)
			}
			if !wanted && got[id] != 0 {
				t.Errorf("%s: store %d was asked for a checkpoint %d times, but no batch of its holds the cut back (asks %v)", what, id, got[id], got)
			}
		}
	}

	// The front record holds batches of logs 1 and 2 (one round).
	front := commit(req(1), req(2))
	check("front record of logs 1 and 2", fillTo(), 1, 2)

	// Log 1 checkpointed: log 2 alone holds the front record.
	if err := j.release(1, front); err != nil {
		t.Fatal(err)
	}
	clear(asks)
	commit(req(3))
	check("log 1 released, log 2 not", maps.Clone(asks), 2)

	// Log 2 too: the front is log 3's first record, and once a quarter
	// is live again only log 3 is asked.
	if err := j.release(2, front); err != nil {
		t.Fatal(err)
	}
	if got := j.recs[0].logs; len(got) != 1 || got[0] != 3 {
		t.Fatalf("after both logs of the front record released, the front record holds logs %v, want [3]", got)
	}
	clear(asks)
	commit(req(4))
	got := maps.Clone(asks)
	if j.Live() < j.Capacity()/4 {
		got = fillTo()
	}
	check("logs 1 and 2 released", got, 3)

	// Below a quarter no one is asked.
	for _, id := range []uint32{3, 4} {
		if err := j.release(id, j.nextSeq-1); err != nil {
			t.Fatal(err)
		}
	}
	if live := j.Live(); live != 0 {
		t.Fatalf("%d bytes live once every log released its batches", live)
	}
	clear(asks)
	commit(req(1))
	check("journal nearly empty", maps.Clone(asks))
}
