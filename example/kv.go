package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// kvEntryJSON is a key's value as /kv/{key} answers it.
type kvEntryJSON struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Revision uint64 `json:"revision"`
}

// kvChangeJSON is one change of a key's history.
type kvChangeJSON struct {
	Revision uint64 `json:"revision"`
	Value    string `json:"value,omitempty"`
	Deleted  bool   `json:"deleted,omitempty"`
}

// kvMismatchJSON is a conditional write's refusal: the revision the key
// was at when the write was applied.
type kvMismatchJSON struct {
	Error    string `json:"error"`
	Code     string `json:"code"`
	Current  uint64 `json:"current"`
	Expected uint64 `json:"expected"`
}

// handleKV serves the key-value view on the log (package kv):
//
//	GET    /kv/{key}                this node's value (may be stale)
//	GET    /kv/{key}?linearizable=1 after a barrier: linearizable
//	GET    /kv/{key}?history=1      the revisions this node still holds
//	PUT    /kv/{key}                set it (the body is the value)
//	PUT    /kv/{key}?create=1       only if absent (409 exists)
//	PUT    /kv/{key}?expected=REV   only at that revision (409 revision_mismatch)
//	DELETE /kv/{key}
//
// GET /kv/ lists the keys (?prefix=P); GET /kv/?all=1 is the whole state
// (handleKVState). Without a KV (it could not open: retention deleted
// what its state needs, or it is reopening after the node installed a
// shipped snapshot, see kvHost) every request gets 503.
func (s *server) handleKV(w http.ResponseWriter, r *http.Request) {
	var store *kv.KV
	if s.kv != nil {
		store = s.kv.get()
	}
	if store == nil {
		msg := "the key-value view is not running on this node"
		if s.kv != nil && s.kv.errText() != "" {
			msg += ": " + s.kv.errText()
		}
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: msg, Code: codeClosed, Outcome: outcomeFailed})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.appendTimeout)
	defer cancel()
	q := r.URL.Query()
	key := r.PathValue("key")
	if key == "" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "GET /kv/ lists the keys"})
			return
		}
		if q.Get("all") != "" {
			s.handleKVState(ctx, w, store, q.Get("linearizable") != "")
			return
		}
		keys := store.Keys(q.Get("prefix"))
		if keys == nil {
			keys = []string{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if q.Get("history") != "" {
			h, err := store.History(ctx, key)
			if err != nil {
				s.kvError(w, err)
				return
			}
			out := make([]kvChangeJSON, 0, len(h))
			for _, c := range h {
				out = append(out, kvChangeJSON{Revision: c.Revision, Value: string(c.Value), Deleted: c.Deleted})
			}
			writeJSON(w, http.StatusOK, map[string]any{"key": key, "history": out})
			return
		}
		var e kv.Entry
		var err error
		if q.Get("linearizable") != "" {
			e, err = store.GetLinearizable(ctx, key)
		} else {
			e, err = store.Get(key)
		}
		if err != nil {
			s.kvError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, kvEntryJSON{Key: e.Key, Value: string(e.Value), Revision: e.Revision})
	case http.MethodPut:
		value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxRecord))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: "value larger than " + strconv.FormatInt(s.maxRecord, 10) + " bytes", Code: codeTooLarge})
			return
		}
		var rev uint64
		switch {
		case q.Get("expected") != "":
			exp, perr := strconv.ParseUint(q.Get("expected"), 10, 64)
			if perr != nil {
				writeJSON(w, http.StatusBadRequest, apiError{Error: "expected must be a revision", Code: codeBadRequest})
				return
			}
			rev, err = store.Update(ctx, key, value, exp)
		case q.Get("create") != "":
			rev, err = store.Create(ctx, key, value)
		default:
			rev, err = store.Put(ctx, key, value)
		}
		if err != nil {
			s.kvWriteError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, kvEntryJSON{Key: key, Value: string(value), Revision: rev})
	case http.MethodDelete:
		rev, err := store.Delete(ctx, key)
		if err != nil {
			s.kvWriteError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"key": key, "revision": rev})
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method " + r.Method + " not allowed; use GET, PUT or DELETE"})
	}
}

// kvStateJSON is GET /kv/?all=1's answer: the KV's whole state on this
// node, as of offset next, and how it came to be.
type kvStateJSON struct {
	// Next: the state reflects every entry below it.
	Next    uint64        `json:"next"`
	Entries []kvEntryJSON `json:"entries"`
	// Opens counts the KVs this process opened (more than one after the
	// log start passed one, see kvHost); RestoredAt is the offset of the
	// snapshot the running one restored (0: none).
	Opens      uint64 `json:"opens"`
	RestoredAt uint64 `json:"restored_at"`
	// Snapshots and SnapshotErrors count the running KV's saves.
	Snapshots      uint64 `json:"snapshots"`
	SnapshotErrors uint64 `json:"snapshot_errors"`
	// Kept lists the snapshots the node keeps, newest first.
	Kept []kvSnapshotJSON `json:"kept"`
}

// kvSnapshotJSON is one snapshot the node keeps.
type kvSnapshotJSON struct {
	Offset uint64 `json:"offset"`
	Size   int64  `json:"size"`
}

// handleKVState answers GET /kv/?all=1: every key with a value, sorted,
// with its value and revision, and the offset the state is of; with
// linearizable after a barrier. The keys are read one by one while the
// KV applies on: two nodes' answers are comparable once writes stop.
func (s *server) handleKVState(ctx context.Context, w http.ResponseWriter, store *kv.KV, linearizable bool) {
	if linearizable {
		if err := store.Barrier(ctx); err != nil {
			s.kvError(w, err)
			return
		}
	}
	out := kvStateJSON{Entries: []kvEntryJSON{}, Kept: []kvSnapshotJSON{}}
	for _, key := range store.Keys("") {
		e, err := store.Get(key)
		if errors.Is(err, kv.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			s.kvError(w, err)
			return
		}
		out.Entries = append(out.Entries, kvEntryJSON{Key: e.Key, Value: string(e.Value), Revision: e.Revision})
	}
	st := store.Stats()
	out.Next, out.Snapshots, out.SnapshotErrors = st.Next, st.Snapshots, st.SnapshotErrors
	out.Opens, out.RestoredAt = s.kv.opens.Load(), st.Restored
	for _, i := range s.kv.log.Snapshots() {
		out.Kept = append(out.Kept, kvSnapshotJSON{Offset: i.Offset, Size: i.Size})
	}
	writeJSON(w, http.StatusOK, out)
}

// kvWriteError answers a KV write's error: as kvError, but a KV that
// ended while the write waited to apply (ErrClosed, ErrStopped: the node
// shut down, or its KV is reopening after a shipped snapshot) leaves its
// outcome unknown, since the entry may have committed.
func (s *server) kvWriteError(w http.ResponseWriter, err error) {
	if errors.Is(err, kv.ErrClosed) || errors.Is(err, kv.ErrStopped) {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error(), Code: codeClosing, Outcome: outcomeUnknown})
		return
	}
	s.kvError(w, err)
}

// kvError answers a KV call's error with its status code.
func (s *server) kvError(w http.ResponseWriter, err error) {
	var mismatch *kv.RevisionMismatchError
	switch {
	case errors.As(err, &mismatch):
		writeJSON(w, http.StatusConflict, kvMismatchJSON{Error: err.Error(), Code: "revision_mismatch", Current: mismatch.Current, Expected: mismatch.Expected})
	case errors.Is(err, kv.ErrExists):
		writeJSON(w, http.StatusConflict, apiError{Error: err.Error(), Code: "exists"})
	case errors.Is(err, kv.ErrNotFound):
		writeJSON(w, http.StatusNotFound, apiError{Error: err.Error(), Code: "not_found"})
	case errors.Is(err, kv.ErrInvalidKey):
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error(), Code: codeBadRequest})
	case errors.Is(err, replog.ErrTooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: err.Error(), Code: codeTooLarge})
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeJSON(w, http.StatusGatewayTimeout, apiError{Error: err.Error(), Code: codeTimeout, Outcome: outcomeUnknown})
	case errors.Is(err, replog.ErrNoLeader):
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error(), Code: codeNoLeader})
	default:
		s.logger.Warn("kv request failed", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error(), Code: codeClosed})
	}
}
