package storage

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// GroupApply is one store's writes in Journal.ApplyGroup, and their
// outcome.
type GroupApply struct {
	// Store is a DirStore on the journal (DirOptions.SharedJournal).
	Store *DirStore
	// Writes are applied as Store.Apply(Writes) would apply them.
	Writes []protocol.Write

	// Err is set by ApplyGroup: nil once the writes are durable and
	// published (or changed nothing), otherwise what Store.Apply would
	// have returned for them (nothing of them applied).
	Err error
	// Deferred is set by ApplyGroup, with Err nil, when the writes need
	// the store to wait: for room in a full journal, or (too large for
	// the journal) for its pending batches to be checkpointed before they
	// go to the segments directly. Nothing of them was applied; the
	// caller applies them with Store.Apply, which waits, before any later
	// writes of that store.
	Deferred bool
}

// ApplyGroup applies the writes of several stores on j at once, each as
// its Store.Apply would (validated against its own state; atomic and
// durable per store), in one round of the journal: one record holding a
// batch of every store whose writes change something, one write and one
// fdatasync (more rounds only if they do not fit in one record's room).
// It is the group commit of a node's writer across its logs: each
// store's batch is prepared under the store's lock, the record written
// and synced once, then each store publishes its state. One store's
// invalid writes fail that store's GroupApply only; the others are
// applied. A failed write or sync of the journal fails every store in
// the round (each latches it, as Apply does). ApplyGroup never waits for
// room or for a checkpoint: such writes come back Deferred. A store may
// appear once; a second time, or a store not on j, is ErrInvalidOptions
// in its Err. The outcome is in each element's Err and Deferred.
func (j *Journal) ApplyGroup(gs []GroupApply) {
	// The stores' locks are taken in log ID order (unique among the
	// stores on j), so that two calls sharing stores never wait for each
	// other crosswise.
	order := make([]int, len(gs))
	for i := range order {
		order[i] = i
		gs[i].Err, gs[i].Deferred = nil, false
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(logIDOf(gs[a].Store), logIDOf(gs[b].Store))
	})
	preps := make([]*journalPrep, len(gs))
	var reqs []*journalReq
	var locked []*DirStore
	defer func() {
		for _, d := range slices.Backward(locked) {
			d.mu.Unlock()
		}
	}()
	seen := make(map[*DirStore]bool, len(gs))
	for _, i := range order {
		g := &gs[i]
		d := g.Store
		if d == nil || seen[d] {
			g.Err = fmt.Errorf("%w: journal %s: ApplyGroup given a store twice, or none", ErrInvalidOptions, j.path)
			continue
		}
		seen[d] = true
		d.mu.Lock()
		locked = append(locked, d)
		g.Err = d.prepareGroup(j, g, &preps[i])
		if preps[i] != nil {
			reqs = append(reqs, preps[i].req)
		}
	}
	if len(reqs) == 0 {
		return
	}
	err := j.commitAll(reqs)
	for i, p := range preps {
		if p == nil {
			continue
		}
		g, d := &gs[i], gs[i].Store
		rerr := err
		if rerr == nil {
			rerr = p.req.err
		}
		switch {
		case errors.Is(rerr, errJournalFull):
			// The store's Apply waits for the cut (and counts the wait).
			g.Deferred = true
			continue
		case rerr != nil:
			g.Err = d.commitFailed(len(g.Writes), rerr)
		default:
			d.publish(p)
		}
		d.applies.Add(1)
		d.writes.Add(uint64(len(g.Writes)))
	}
}

// logIDOf is d's log ID on its journal (0 for nil).
func logIDOf(d *DirStore) uint32 {
	if d == nil {
		return 0
	}
	return d.logID
}

// prepareGroup is g's part of ApplyGroup before the round (d.mu held):
// its error, or its record in *p, or Deferred set, or nothing to write.
func (d *DirStore) prepareGroup(j *Journal, g *GroupApply, p **journalPrep) error {
	switch {
	case d.closed.Load():
		return ErrClosed
	case d.readOnly:
		return ErrReadOnly
	}
	if err := d.failure(); err != nil {
		return err
	}
	if d.j != j {
		return fmt.Errorf("%w: store %s is not on journal %s", ErrInvalidOptions, d.dir, j.path)
	}
	prep, err := d.prepareJournal(g.Writes)
	if err == nil && prep != nil && prep.direct(j) {
		g.Deferred = true
		return nil // its Apply counts it
	}
	if err == nil && prep != nil {
		var changed bool
		if changed, err = prep.against(d.jv.Load()); changed {
			*p = prep
			return nil // counted after the round
		}
	}
	d.applies.Add(1)
	d.writes.Add(uint64(len(g.Writes)))
	return err
}
