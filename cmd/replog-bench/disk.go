package main

import (
	"context"
	"io/fs"
	"path/filepath"
	"sync"
	"time"
)

// diskUsage is one measurement of a data directory.
type diskUsage struct {
	// Size adds up the regular files' sizes (what ls shows, and
	// Log.Stats' StorageBytes).
	Size int64
	// Alloc adds up the blocks allocated to them (what du shows: bbolt
	// grows a file by truncating it, so a file's tail may be a hole); -1
	// where the platform does not say.
	Alloc int64
	// Files counts the regular files.
	Files int
}

// measureDir measures dir; a missing directory is empty.
func measureDir(dir string) diskUsage {
	var u diskUsage
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // a file may go while we walk: retention unlinks segments
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		u.Files++
		u.Size += fi.Size()
		if a := allocated(fi); a >= 0 && u.Alloc >= 0 {
			u.Alloc += a
		} else {
			u.Alloc = -1
		}
		return nil
	})
	return u
}

// diskSampler measures each node's data directory now and then and keeps
// the largest and the latest measurement of each.
type diskSampler struct {
	dirs []string

	mu      sync.Mutex
	samples int
	max     []diskUsage // field by field
	last    []diskUsage
}

func newDiskSampler(dirs []string) *diskSampler {
	return &diskSampler{dirs: dirs, max: make([]diskUsage, len(dirs)), last: make([]diskUsage, len(dirs))}
}

// sample measures every directory once.
func (s *diskSampler) sample() {
	us := make([]diskUsage, len(s.dirs))
	for i, d := range s.dirs {
		us[i] = measureDir(d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for i, u := range us {
		s.last[i] = u
		m := &s.max[i]
		m.Size = max(m.Size, u.Size)
		m.Alloc = max(m.Alloc, u.Alloc)
		m.Files = max(m.Files, u.Files)
	}
}

// start samples now and then every interval until the returned stop is
// called; stop takes one last sample (the final figures) once the
// sampling goroutine has ended.
func (s *diskSampler) start(every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		s.sample()
	}
}

// results returns the number of samples and, per directory, the largest
// and the last measurement.
func (s *diskSampler) results() (samples int, maxes, finals []diskUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, append([]diskUsage(nil), s.max...), append([]diskUsage(nil), s.last...)
}
