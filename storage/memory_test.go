package storage_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

func TestMemoryDeferredCrashLosesUnsynced(t *testing.T) {
	m := storage.NewMemoryDeferred()
	if err := m.Append(storagetest.Batch(0, 5, 1, 8)); err != nil {
		t.Fatal(err)
	}
	if err := m.SetQuorumState(protocol.QuorumState{Epoch: 1, VotedFor: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	// Unsynced: visible at once.
	if err := m.Append(storagetest.Batch(5, 5, 2, 8)); err != nil {
		t.Fatal(err)
	}
	if err := m.SetHWCheckpoint(7); err != nil {
		t.Fatal(err)
	}
	if err := m.TruncateSuffix(8); err != nil {
		t.Fatal(err)
	}
	// Invalid and no-op writes are not counted.
	_ = m.Append(storagetest.Batch(20, 1, 2, 8))
	_ = m.TruncateSuffix(100)
	if m.LEO() != 8 || m.Unsynced() != 3 {
		t.Fatalf("LEO %d, unsynced %d; want 8, 3", m.LEO(), m.Unsynced())
	}
	crashed := m.Crash()
	if err := m.Append(storagetest.Batch(8, 1, 2, 8)); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Append on a crashed store = %v, want ErrClosed", err)
	}
	if crashed.LEO() != 5 || crashed.LastEpoch() != 1 || crashed.Unsynced() != 0 {
		t.Fatalf("after crash: LEO %d, last epoch %d, unsynced %d; want 5, 1, 0", crashed.LEO(), crashed.LastEpoch(), crashed.Unsynced())
	}
	if _, ok, _ := crashed.HWCheckpoint(); ok {
		t.Fatal("unsynced HW checkpoint survived the crash")
	}
	if q, _ := crashed.QuorumState(); q.VotedFor != "a" {
		t.Fatalf("synced quorum state lost: %+v", q)
	}
	if err := storagetest.CheckConsistent(crashed); err != nil {
		t.Fatal(err)
	}
	// The crashed store is deferred too.
	if err := crashed.Append(storagetest.Batch(5, 1, 3, 8)); err != nil {
		t.Fatal(err)
	}
	if crashed.Crash().LEO() != 5 {
		t.Fatal("unsynced append survived a second crash")
	}
}

// CrashAfter(n) keeps a prefix of the unsynced writes, each whole.
func TestMemoryCrashAfterKeepsPrefix(t *testing.T) {
	for n := 0; n <= 4; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := storage.NewMemoryDeferred()
			writes := []func() error{
				func() error { return m.Append(storagetest.Batch(0, 3, 1, 8)) },
				func() error { return m.Append(storagetest.Batch(3, 3, 2, 8)) },
				func() error { return m.TruncateSuffix(4) },
				func() error { return m.DeletePrefix(2) },
			}
			wantLEO := []uint64{0, 3, 6, 4, 4}
			wantStart := []uint64{0, 0, 0, 0, 2}
			for _, w := range writes {
				if err := w(); err != nil {
					t.Fatal(err)
				}
			}
			c := m.CrashAfter(n)
			if c.LEO() != wantLEO[n] || c.LogStart() != wantStart[n] {
				t.Fatalf("CrashAfter(%d): LEO %d, start %d; want %d, %d", n, c.LEO(), c.LogStart(), wantLEO[n], wantStart[n])
			}
			if err := storagetest.CheckConsistent(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Outside deferred mode every write is durable at once.
func TestMemoryCrashKeepsEverything(t *testing.T) {
	m := storage.NewMemory()
	if err := m.Append(storagetest.Batch(0, 4, 1, 8)); err != nil {
		t.Fatal(err)
	}
	if m.Unsynced() != 0 {
		t.Fatalf("Unsynced() = %d outside deferred mode", m.Unsynced())
	}
	c := m.Crash()
	if c.LEO() != 4 {
		t.Fatalf("LEO after crash %d, want 4", c.LEO())
	}
	// The two stores are independent.
	if err := c.TruncateSuffix(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(storagetest.Batch(1, 1, 2, 8)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// In deferred mode the unit of a crash is an Apply: CrashAfter(n) keeps
// the first n unsynced Apply calls, each batch of mixed writes whole.
func TestMemoryDeferredCrashKeepsWholeBatches(t *testing.T) {
	q := protocol.QuorumState{Epoch: 2, VotedFor: "n1"}
	batches := [][]protocol.Write{
		{
			{Kind: protocol.WriteAppend, Entries: storagetest.Batch(0, 3, 1, 8)},
			{Kind: protocol.WriteHWCheckpoint, Offset: 3},
		},
		{
			{Kind: protocol.WriteQuorumState, Quorum: q},
			{Kind: protocol.WriteTruncate, Offset: 2},
			{Kind: protocol.WriteAppend, Entries: storagetest.Batch(2, 4, 2, 8)},
			{Kind: protocol.WriteHWCheckpoint, Offset: 5},
		},
		{{Kind: protocol.WriteAppend}}, // a no-op: not an unsynced Apply
	}
	type state struct {
		leo, hw uint64
		epoch   uint64
	}
	want := []state{{0, 0, 0}, {3, 3, 0}, {6, 5, 2}}
	for n := 0; n <= 2; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := storage.NewMemoryDeferred()
			for _, b := range batches {
				if err := m.Apply(b); err != nil {
					t.Fatal(err)
				}
			}
			if m.Unsynced() != 2 {
				t.Fatalf("Unsynced() = %d, want 2 (one per Apply that changed something)", m.Unsynced())
			}
			c := m.CrashAfter(n)
			hw, _, _ := c.HWCheckpoint()
			qs, _ := c.QuorumState()
			if got := (state{c.LEO(), hw, qs.Epoch}); got != want[n] {
				t.Fatalf("CrashAfter(%d) = %+v, want %+v", n, got, want[n])
			}
			if err := storagetest.CheckConsistent(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
