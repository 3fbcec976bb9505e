package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestDirSegmentsListing: Segments lists the sealed segments then the
// active one, contiguous, with their files' sizes; after a prefix deletion
// the segments wholly below the log start are gone from the list (and from
// the disk), and the first listed may start below the log start.
func TestDirSegmentsListing(t *testing.T) {
	l := newSegLog(t, tinySegment)
	l.appendN(40, 20, 1)
	segs := l.s.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments after 40 batches with tiny segments, want several", len(segs))
	}
	var next uint64
	for i, s := range segs {
		if s.Base != next || s.End < s.Base || s.Active != (i == len(segs)-1) || s.Bytes <= 0 {
			t.Fatalf("segment %d: %+v (want base %d, positive size, only the last active)", i, s, next)
		}
		if i < len(segs)-1 && filepath.Base(s.Path) == "replog.db" || s.Active && filepath.Base(s.Path) != "replog.db" {
			t.Fatalf("segment %d: path %s", i, s.Path)
		}
		next = s.End
	}
	if next != l.s.LEO() {
		t.Fatalf("segments end at %d, LEO %d", next, l.s.LEO())
	}
	cut := segs[1].Base + 1 // inside the second segment
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: cut})
	l.s.Settle() // the files go after the Apply
	after := l.s.Segments()
	if len(after) != len(segs)-1 || after[0].Base != segs[1].Base || after[0].Base > l.s.LogStart() {
		t.Fatalf("after deleting before %d: %+v", cut, after)
	}
	if got := len(segFiles(t, l.s.Dir())); got != len(after)-1 {
		t.Fatalf("%d sealed files on disk, %d listed", got, len(after)-1)
	}
	l.check("after the deletion")
}
