package kv

import (
	"context"
	"iter"
	"slices"
	"strings"
)

// Watch returns an iterator over the changes to keys beginning with
// prefix, as this node applies them: first the current value of each such
// key (sorted by key, as Changes at their revisions), then every change
// applied after that, in log order, each with its revision (its entry's
// offset). A failed Create or Update, and a Delete of a key without a
// value, change nothing and are not watched.
//
// The iterator runs in the caller's goroutine and starts none; the apply
// loop never waits for it. It keeps up to Options.WatchBuffer changes
// for slow watchers. It yields a non-nil error once and stops: ctx.Err()
// when ctx ends; ErrWatchBehind when it fell further behind than that
// (watch again); ErrClosed or ErrStopped when the KV ends.
func (k *KV) Watch(ctx context.Context, prefix string) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		k.mu.RLock()
		var initial []Change
		for key, r := range k.state {
			if r.Live() && strings.HasPrefix(key, prefix) {
				initial = append(initial, Change{Key: key, Value: slices.Clone(r.Value), Revision: r.Rev})
			}
		}
		pos := k.changes
		k.mu.RUnlock()
		slices.SortFunc(initial, func(a, b Change) int { return strings.Compare(a.Key, b.Key) })
		for _, c := range initial {
			if !yield(c, nil) {
				return
			}
		}
		for {
			if err := ctx.Err(); err != nil {
				yield(Change{}, err)
				return
			}
			k.mu.RLock()
			total, ch, stopErr := k.changes, k.applied, k.err
			var batch []Change
			behind := total-pos > uint64(len(k.ring))
			if !behind {
				for ; pos < total; pos++ {
					c := k.ring[pos%uint64(cap(k.ring))]
					if strings.HasPrefix(c.Key, prefix) {
						c.Value = slices.Clone(c.Value)
						batch = append(batch, c)
					}
				}
			}
			k.mu.RUnlock()
			if behind {
				yield(Change{}, ErrWatchBehind)
				return
			}
			for _, c := range batch {
				if !yield(c, nil) {
					return
				}
			}
			if stopErr != nil {
				yield(Change{}, stopErr)
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
			}
		}
	}
}
