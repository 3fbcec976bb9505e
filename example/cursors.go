package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/replog-io/replog"
)

// cursorJSON is the body of PUT /cursors/{name} (Next only) and the
// answer of both cursor endpoints.
type cursorJSON struct {
	Name string `json:"name,omitempty"`
	// Next is the next offset the cursor's consumer reads.
	Next *uint64 `json:"next"`
}

// handleCursor serves GET and PUT /cursors/{name}: replog's Cursor and
// CommitCursor, on any node. GET answers the cursor's committed position
// as of a barrier (it covers every commit acknowledged anywhere before
// the request); PUT {"next":N} commits a new position and answers once it
// is committed. Both wait at most appendTimeout.
func (s *server) handleCursor(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" || len(name) > replog.MaxIDLength {
		writeJSON(w, http.StatusBadRequest, apiError{Code: codeBadRequest,
			Error: "a cursor name is 1 to " + strconv.Itoa(replog.MaxIDLength) + " bytes"})
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		ctx, cancel := context.WithTimeout(r.Context(), s.appendTimeout)
		defer cancel()
		next, err := s.node.Cursor(ctx, name)
		extend(http.NewResponseController(w))
		if err != nil {
			code, body := s.cursorError(err, false)
			writeJSON(w, code, body)
			return
		}
		writeJSON(w, http.StatusOK, cursorJSON{Name: name, Next: &next})
	case http.MethodPut:
		var body cursorJSON
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
		if err := dec.Decode(&body); err != nil || body.Next == nil {
			msg := `want {"next": N}`
			if err != nil && !errors.Is(err, io.EOF) {
				msg += ": " + err.Error()
			}
			writeJSON(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Error: msg})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.appendTimeout)
		defer cancel()
		err := s.node.CommitCursor(ctx, name, *body.Next)
		extend(http.NewResponseController(w))
		if err != nil {
			code, body := s.cursorError(err, true)
			s.logger.Debug("cursor commit failed", "cursor", name, "status", code, "error", err)
			writeJSON(w, code, body)
			return
		}
		writeJSON(w, http.StatusOK, cursorJSON{Name: name, Next: body.Next})
	default:
		w.Header().Set("Allow", "GET, PUT")
		writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method " + r.Method + " not allowed; use GET or PUT"})
	}
}

// cursorError maps a Cursor (commit false) or CommitCursor error to a
// status code and body, with /append's codes: a commit's outcome may be
// unknown as an append's (then commit it again); a read has no outcome.
func (s *server) cursorError(err error, commit bool) (int, apiError) {
	if errors.Is(err, replog.ErrNoCursor) {
		return http.StatusNotFound, apiError{Error: err.Error(), Code: codeNoCursor}
	}
	code, body := s.appendError(err)
	if !commit {
		body.Outcome = ""
	}
	return code, body
}
