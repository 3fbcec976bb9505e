package storage

import "os"

// SegmentInfo describes one segment file of a DirStore, for retention
// policies and tools.
type SegmentInfo struct {
	// Base and End bound the offsets the segment holds for the log:
	// [Base, End). The active segment's End is the LEO. A sealed segment
	// wholly below the log start is no longer listed.
	Base, End uint64
	// Bytes is the file's size on disk (0 if it could not be read).
	Bytes int64
	// Active is true for the one segment being written (the last).
	Active bool
	// Path is the file.
	Path string
}

// Segments lists the log's segments in offset order, the active one last.
// It reads only the store's in-memory state and the files' sizes: no
// segment is opened. The first segment may start below the log start (a
// prefix deletion unlinks only whole segments).
func (d *DirStore) Segments() []SegmentInfo {
	st := d.state.Load()
	out := make([]SegmentInfo, 0, len(st.sealed)+1)
	d.cacheMu.Lock()
	for _, s := range st.sealed {
		out = append(out, SegmentInfo{Base: s.base, End: s.end, Path: s.f.path})
	}
	out = append(out, SegmentInfo{Base: st.base, End: st.log.leo, Active: true, Path: st.active.path})
	d.cacheMu.Unlock()
	for i := range out {
		if fi, err := os.Stat(out[i].Path); err == nil {
			out[i].Bytes = fi.Size()
		}
	}
	return out
}
