package main

import (
	"errors"
	"net/http"

	"github.com/replog-io/replog"
)

// compaction is the default log's replog.Compaction from the -compact
// flags (the zero value, off, without -compact).
func compaction(cfg config) replog.Compaction {
	if !cfg.compact {
		return replog.Compaction{}
	}
	return replog.Compaction{
		Enabled:            true,
		Lag:                cfg.compactLag,
		TombstoneRetention: cfg.compactTombstones,
		BytesPerSecond:     cfg.compactRate,
		Interval:           cfg.compactEvery,
	}
}

// compactingLog is what /compact needs of a log: a *replog.Log.
type compactingLog interface {
	Compact() error
	Stats() replog.Stats
}

// compactJSON is /compact's answer: the log's compaction counters
// (replog.Stats), after the pass for a POST.
type compactJSON struct {
	Passes         uint64 `json:"passes"`
	Segments       uint64 `json:"segments"`
	EntriesRemoved uint64 `json:"entries_removed"`
	BytesRead      uint64 `json:"bytes_read"`
	BytesFreed     uint64 `json:"bytes_freed"`
	Point          uint64 `json:"point"`
	LastPassMillis int64  `json:"last_pass_ms"`
}

func compactCounters(st replog.Stats) compactJSON {
	return compactJSON{
		Passes: st.CompactionPasses, Segments: st.CompactionSegments, EntriesRemoved: st.CompactionEntriesRemoved,
		BytesRead: st.CompactionBytesRead, BytesFreed: st.CompactionBytesFreed, Point: st.CompactionPoint,
		LastPassMillis: st.CompactionLastPass.Milliseconds(),
	}
}

// handleCompact serves /compact: GET the log's compaction counters, POST
// a pass now (replog's Log.Compact), answered once it is done. The node
// logs "compaction pass started" and "compaction pass done" around it,
// so that a test can tell a process killed during a pass.
func (s *server) handleCompact(w http.ResponseWriter, r *http.Request) {
	lg, ok := s.node.(compactingLog)
	if !ok {
		writeJSON(w, http.StatusNotFound, apiError{Error: "this log cannot compact"})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, compactCounters(lg.Stats()))
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method " + r.Method + " not allowed; use GET or POST"})
		return
	}
	s.logger.Info("compaction pass started")
	err := lg.Compact()
	// A pass may take longer than the server's WriteTimeout (a full
	// pass of a large log under a low -compact-rate).
	extend(http.NewResponseController(w))
	st := compactCounters(lg.Stats())
	switch {
	case errors.Is(err, replog.ErrInvalidArgument):
		writeJSON(w, http.StatusConflict, apiError{Error: err.Error(), Code: "not_compacted"})
	case errors.Is(err, replog.ErrClosed):
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error(), Code: "closed"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error(), Code: "internal"})
	default:
		s.logger.Info("compaction pass done", "passes", st.Passes, "segments", st.Segments, "removed", st.EntriesRemoved, "took_ms", st.LastPassMillis)
		writeJSON(w, http.StatusOK, st)
	}
}
