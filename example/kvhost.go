package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// kvReopenFirst and kvReopenMax bound how long kvHost waits before it
// tries again to open a KV that could not open: from the first, doubled
// on each failure up to the max (a node waiting for its log to reach a
// snapshot it installed opens soon; one reset without a snapshot never
// will, and costs a snapshot read per try).
const (
	kvReopenFirst = 100 * time.Millisecond
	kvReopenMax   = 2 * time.Second
)

// kvHost keeps the node's key-value view running. A KV stops when the
// log start passes what it has applied: on a wiped node, or one below
// its leader's log start, once the node installed the snapshot its
// leader shipped and reset its log to the leader's log start (R92). The
// host then opens another, which restores that snapshot and reads on
// from its offset: the node's state comes from the log alone, as on
// every other node (R91). While no KV runs, /kv answers 503.
type kvHost struct {
	log    *replog.Log
	opts   kv.Options
	logger hclog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	cur atomic.Pointer[kv.KV]
	// opens counts the KVs opened.
	opens   atomic.Uint64
	mu      sync.Mutex
	lastErr string // why the last open failed, or the last KV stopped
}

// startKV opens the KV on log and keeps it open until stop.
func startKV(log *replog.Log, opts kv.Options, logger hclog.Logger) *kvHost {
	ctx, cancel := context.WithCancel(context.Background())
	h := &kvHost{log: log, opts: opts, logger: logger, cancel: cancel, done: make(chan struct{})}
	go h.run(ctx)
	return h
}

// get returns the running KV, nil if none.
func (h *kvHost) get() *kv.KV { return h.cur.Load() }

// stop closes the KV and ends the host.
func (h *kvHost) stop() {
	h.cancel()
	<-h.done
}

func (h *kvHost) setErr(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err.Error()
}

// errText is why no KV runs, or why the last one stopped.
func (h *kvHost) errText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

func (h *kvHost) run(ctx context.Context) {
	defer close(h.done)
	warned, wait := "", kvReopenFirst
	for ctx.Err() == nil {
		k, err := kv.Open(ctx, h.log, h.opts)
		if err != nil {
			if errors.Is(err, replog.ErrClosed) {
				return
			}
			h.setErr(err)
			// Once per reason (the offsets in the message move on).
			reason := err.Error()
			if errors.Is(err, replog.ErrOutOfRange) {
				reason = "out of range"
			}
			if reason != warned {
				h.logger.Warn("the key-value view is not running; trying again", "error", err)
				warned = reason
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, kvReopenMax)
			continue
		}
		warned, wait = "", kvReopenFirst
		h.opens.Add(1)
		h.cur.Store(k)
		if n := h.opens.Load(); n > 1 {
			h.logger.Info("key-value view reopened", "opens", n, "restored_at", k.Stats().Restored)
		}
		select {
		case <-ctx.Done():
		case <-k.Done():
		}
		h.cur.Store(nil)
		_ = k.Close()
		err = k.Err()
		if ctx.Err() != nil || errors.Is(err, kv.ErrClosed) {
			return
		}
		h.setErr(err)
		h.logger.Info("the key-value view stopped; reopening it", "error", err)
	}
}
