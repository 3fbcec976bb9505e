package storage

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// background is a read-write DirStore's goroutine for the file work that
// Apply must not wait for (docs/storage.md section 4, "Off the append
// path"):
//
//   - It prepares the next active file: once the active file's pages pass
//     half of SegmentBytes (Apply asks, see want), it creates
//     nextActiveName as an empty bbolt file with the store's buckets,
//     grown by one allocation step, so that a roll only writes the log's
//     state and the rolling Apply's writes into it. The file is never part
//     of the log until a roll renames it over DataFileName: a crash leaves
//     it for Open to remove, as any unfinished roll.
//   - It runs jobs, in order: closing segment handles nobody reads any more
//     (the files a prefix deletion dropped, the handles a roll evicted),
//     shrinking step by step and unlinking the files of a prefix deletion
//     once its commit is durable (a crash before leaves orphans, which
//     Open removes), trimming a sealed file to its pages.
//
// A roll and the preparation both use the name nextActiveName: busy says
// one of them does, and each waits for the other (a roll finding the
// preparation under way waits for it, then takes its file).
type background struct {
	mu     sync.Mutex
	wake   *sync.Cond // a change of want, stop, busy or jobs
	want   bool       // prepare the next active file
	busy   bool       // nextActiveName is in use (being prepared, or taken by a roll)
	ready  *bolt.DB   // the prepared next active file, open; nil if none
	jobs   []func()   // run in order
	inJob  bool       // a job is running
	stop   bool
	exited chan struct{}
}

func newBackground() *background {
	b := &background{exited: make(chan struct{})}
	b.wake = sync.NewCond(&b.mu)
	return b
}

// run is the goroutine: a preparation if one is asked for and the name is
// free, else the jobs in order; at stop it runs the jobs queued (without
// pacing, see shrinkDropped) and returns. It never takes DirStore.mu.
func (b *background) run(d *DirStore) {
	defer close(b.exited)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		switch {
		case b.want && !b.busy && b.ready == nil && !b.stop:
			// First: a few milliseconds, which a roll may be waiting for
			// (a deletion's jobs take longer, paced).
			b.want, b.busy = false, true
			b.mu.Unlock()
			db, err := d.prepareNext()
			if err != nil {
				// The roll makes the file itself, and meets the error if
				// it is not a passing one.
				d.log.Warn("could not prepare the next active segment (the roll will make it)", "path", filepath.Join(d.dir, nextActiveName), "error", err)
			}
			b.mu.Lock()
			b.busy, b.ready = false, db
			b.wake.Broadcast()
		case len(b.jobs) > 0:
			job := b.jobs[0]
			b.jobs[0] = nil
			b.jobs = b.jobs[1:]
			b.inJob = true
			b.mu.Unlock()
			job()
			b.mu.Lock()
			b.inJob = false
			b.wake.Broadcast()
		case b.stop:
			return
		default:
			b.wake.Wait()
		}
	}
}

// enqueue adds a job.
func (b *background) enqueue(job func()) {
	b.mu.Lock()
	b.jobs = append(b.jobs, job)
	b.wake.Broadcast()
	b.mu.Unlock()
}

// request asks for the next active file to be prepared (a no-op if one is
// ready or under way).
func (b *background) request() {
	b.mu.Lock()
	b.want = true
	b.wake.Broadcast()
	b.mu.Unlock()
}

// take waits until nextActiveName is free, claims it for a roll, and
// returns the prepared file (nil if none): the roll gives the name back
// with put.
func (b *background) take() *bolt.DB {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.busy {
		b.wake.Wait()
	}
	db := b.ready
	b.ready, b.busy = nil, true
	return db
}

// put gives the name back after a roll; db, if not nil, is a prepared file
// the roll did not use (unchanged: its transaction rolled back).
func (b *background) put(db *bolt.DB) {
	b.mu.Lock()
	b.busy, b.ready = false, db
	b.wake.Broadcast()
	b.mu.Unlock()
}

// settle waits until the goroutine is idle: the jobs queued have run and
// the preparation asked for is done (for the tests; with no Apply under
// way, busy means a preparation).
func (b *background) settle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.stop && (len(b.jobs) > 0 || b.inJob || b.busy || b.want && b.ready == nil) {
		b.wake.Wait()
	}
}

// stopping reports whether Close asked the goroutine to stop (its jobs
// then hurry).
func (b *background) stopping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stop
}

// halt stops the goroutine once the jobs queued are done, and waits for it.
func (b *background) halt() {
	b.mu.Lock()
	b.stop = true
	b.wake.Broadcast()
	b.mu.Unlock()
	<-b.exited
}

// finish, after halt and with DirStore.mu held (no roll under way), runs
// the jobs queued since and closes and removes a prepared file.
func (b *background) finish(d *DirStore) {
	b.mu.Lock()
	jobs, db := b.jobs, b.ready
	b.jobs, b.ready = nil, nil
	b.mu.Unlock()
	for _, job := range jobs {
		job()
	}
	if db != nil {
		d.discardNext(db)
	}
}

// prepareNext creates nextActiveName as an empty bbolt file with the
// store's buckets (written and synced, grown by one allocation step), for
// the next roll. Called with the name claimed (busy).
func (d *DirStore) prepareNext() (*bolt.DB, error) {
	path := filepath.Join(d.dir, nextActiveName)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	db, _, err := openSegment(path, kindNew, &d.opts)
	if err != nil {
		return nil, err
	}
	// Not synced: the roll syncs the file whole before it enters the log.
	db.NoSync = true
	err = db.Update(func(tx *bolt.Tx) error { return createBuckets(tx, nil) })
	db.NoSync = d.opts.NoSync
	if err != nil {
		d.discardNext(db)
		return nil, err
	}
	if rollHook != nil {
		rollHook("prepared")
	}
	return db, nil
}

// discardNext closes a next active file that no roll will use and removes
// it (a leftover is harmless: Open removes it).
func (d *DirStore) discardNext(db *bolt.DB) {
	path := db.Path()
	if err := db.Close(); err != nil {
		d.log.Warn("closing the next active segment", "path", path, "error", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("could not remove the next active segment (it is removed at the next open)", "path", path, "error", err)
	}
}
