package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
)

// logNode is what the HTTP handlers need from a replog node. *replog.Log
// implements it; tests use a fake.
type logNode interface {
	// Append blocks until data is committed or fails (see
	// replog.Log.Append); with replog.WithID, an ID appended within the
	// dedup window returns the original offset and an error wrapping
	// replog.ErrDuplicate.
	Append(ctx context.Context, data []byte, opts ...replog.AppendOption) (uint64, error)
	// Read iterates committed entries from offset from, waiting at the HW
	// until ctx ends.
	Read(ctx context.Context, from uint64) iter.Seq2[replog.Entry, error]
	// ReadRange is Read bounded to offsets below to: it ends, without an
	// error, once it has passed to-1 (control entries count).
	ReadRange(ctx context.Context, from, to uint64) iter.Seq2[replog.Entry, error]
	// Status is a snapshot of the node's state.
	Status() replog.Status
	// DeleteBefore deletes the committed entries below offset and returns
	// the node's log start once it covers them (see
	// replog.Log.DeleteBefore).
	DeleteBefore(ctx context.Context, offset uint64) (uint64, error)
	// AddVoter makes a node that fetches from the leader a voter, once it
	// has caught up; RemoveVoter removes a voter. Both return once the
	// change is committed (see replog.Log.AddVoter).
	AddVoter(ctx context.Context, nodeID string) error
	RemoveVoter(ctx context.Context, nodeID string) error
	// TransferLeadership hands the leadership over to voter to ("": the
	// most caught-up one); on a node that does not lead it fails with a
	// *replog.NotLeaderError (see replog.Log.TransferLeadership).
	TransferLeadership(ctx context.Context, to string) error
	// CommitCursor records a named consumer position; Cursor reads it
	// back on any node (replog.ErrNoCursor: never committed).
	CommitCursor(ctx context.Context, name string, next uint64) error
	Cursor(ctx context.Context, name string) (uint64, error)
}

// Outcomes of a failed append, as the API reports them.
const (
	// outcomeFailed: the record is definitely not in the log.
	outcomeFailed = "failed"
	// outcomeUnknown: the record may or may not be in the log.
	outcomeUnknown = "unknown"
)

// Error codes of /append and the cursor endpoints (apiError.Code): what
// a client program switches on, rather than the status code alone.
const (
	// The outcome is unknown (the record may be in the log; retry with
	// the same Idempotency-Key): the append's -append-timeout ended first
	// (504), the node is closing (503), or another unknown outcome (503).
	codeTimeout        = "timeout"
	codeClosing        = "closing"
	codeUnknownOutcome = "unknown_outcome"
	// The record is not in the log (503): no leader known, this node
	// does not lead and knows where the leader is, or it is closed.
	codeNoLeader  = "no_leader"
	codeNotLeader = "not_leader"
	codeClosed    = "closed"
	// The request itself: too large (413), unreadable or bad (400).
	codeTooLarge   = "too_large"
	codeBadRequest = "bad_request"
	codeBadKey     = "bad_idempotency_key"
	// A cursor never committed (404).
	codeNoCursor = "no_cursor"
	// /logs/NAME/: no log NAME open here (404), or one this node is not
	// a replica of (404).
	codeUnknownLog = "unknown_log"
	codeNotReplica = "not_replica"
	// A server fault (500): the node's disk failed, or an error the API
	// does not know. The outcome is unknown.
	codeStorageFailed = "storage_failed"
	codeInternal      = "internal"
)

// idempotencyHeader is the request header that carries an append's ID
// (replog.WithID); replayedHeader marks an answer to a duplicate.
const (
	idempotencyHeader = "Idempotency-Key"
	replayedHeader    = "Idempotent-Replayed"
)

// apiError is the JSON body of every error response.
type apiError struct {
	Error string `json:"error"`
	// Code names the error on /append and the cursor endpoints (code*).
	Code string `json:"code,omitempty"`
	// Outcome is set on /append and PUT /cursors errors only.
	Outcome string `json:"outcome,omitempty"`
	// Leader and LeaderURL point at the leader when the node knows it.
	Leader    string `json:"leader,omitempty"`
	LeaderURL string `json:"leader_url,omitempty"`
	// LogStart is set on errors of reads below the log start (the offset
	// to resume from) and of /delete-before (where the node's log start
	// stands now).
	LogStart *uint64 `json:"log_start,omitempty"`
}

// deleteJSON is /delete-before's answer.
type deleteJSON struct {
	// LogStart is the node's log start once it covered the deletion: the
	// requested offset, or less where the entries are not yet committed
	// (only committed entries go, and the last of them stays: replog
	// keeps the log start below the HW).
	LogStart uint64 `json:"log_start"`
	// Requested is the offset asked for.
	Requested uint64 `json:"requested"`
	// HighWatermark is the node's HW as it answered.
	HighWatermark uint64 `json:"hw"`
}

// votersJSON is the answer of /voters/add and /voters/remove: the node
// changed and the voter set in force on this node once the change
// committed.
type votersJSON struct {
	Node   string               `json:"node"`
	Voters []replog.VoterStatus `json:"voters"`
}

// entryJSON is one line of /entries. Data is base64 (encoding/json's []byte).
type entryJSON struct {
	Offset uint64 `json:"offset"`
	Epoch  uint64 `json:"epoch"`
	Data   []byte `json:"data"`
	// Key is the entry's key (replog.WithKey; the KV's Puts and Deletes
	// carry one), left out when it has none.
	Key string `json:"key,omitempty"`
}

// nodeInfo names one node of the cluster and its HTTP base URL.
type nodeInfo struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// configJSON is what the dashboard needs to find the other nodes.
type configJSON struct {
	Self    string     `json:"self"`
	Nodes   []nodeInfo `json:"nodes"`
	Control string     `json:"control,omitempty"`
}

// server serves the example's HTTP API and dashboard for one node.
type server struct {
	node logNode
	// logs are the node's logs, for /logs and /logs/NAME/ (nil: the node
	// runs one log).
	logs logHost
	// self is this node's ID; selfURL its HTTP base URL (set once bound).
	self    string
	selfURL string
	// peers maps the other nodes' IDs to their HTTP base URLs.
	peers map[string]string
	// voters is the configured voter list (shown even if a voter has no URL).
	voters []string
	// control is the demo parent's control URL ("" outside demo mode).
	control string
	// appendTimeout bounds one /append request.
	appendTimeout time.Duration
	// deleteTimeout bounds one /delete-before request.
	deleteTimeout time.Duration
	// voterTimeout bounds one /voters/add, /voters/remove or
	// /leader/transfer request.
	voterTimeout time.Duration
	// maxRecord bounds a request body; larger bodies get 413.
	maxRecord int64
	// hist records status changes for the dashboard's step-by-step view;
	// nil disables /history. sampler fills it while /history is read (nil:
	// nothing to wake).
	hist    *history
	sampler *sampler
	// metrics serves GET /metrics (Prometheus text); nil: 404.
	metrics http.Handler
	// admin is the node's replogadmin handler, served under /admin/ (what
	// replogctl status and tail ask); nil: not served.
	admin http.Handler
	// kv keeps the key-value view on the log running, served under /kv/
	// (nil, or no KV running: 503).
	kv     *kvHost
	logger hclog.Logger
}

// handler returns the node's HTTP handler. Web pages from the other
// nodes' origins (-http-peers) may use it, since the dashboard served by
// one node polls and appends through all of them; pages from any other
// origin can neither read the answers nor change anything (see guard).
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	s.logRoutes(mux)
	mux.HandleFunc("/logs", s.only(http.MethodGet, s.handleLogs))
	mux.HandleFunc("/logs/{name}/", s.handleNamedLog)
	mux.HandleFunc("/history", s.only(http.MethodGet, s.handleHistory))
	mux.HandleFunc("/config", s.only(http.MethodGet, s.handleConfig))
	mux.HandleFunc("/metrics", s.only(http.MethodGet, s.handleMetrics))
	mux.HandleFunc("/kv/{key...}", s.handleKV)
	if s.admin != nil {
		mux.Handle("/admin/", http.StripPrefix("/admin", s.admin))
	}
	mux.Handle("/{$}", s.only(http.MethodGet, serveIndex))
	mux.Handle("/static/", s.only(http.MethodGet, staticHandler().ServeHTTP))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no such endpoint: " + r.URL.Path})
	})
	return guard(slices.Collect(maps.Values(s.peers)), mux, s.logger)
}

// logRoutes adds the routes of one log, s.node, to mux: the default
// log's at the root, a named log's under /logs/NAME/ (handleNamedLog).
func (s *server) logRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/append", s.only(http.MethodPost, s.handleAppend))
	mux.HandleFunc("/entries", s.only(http.MethodGet, s.handleEntries))
	mux.HandleFunc("/delete-before", s.only(http.MethodPost, s.handleDeleteBefore))
	mux.HandleFunc("/voters/add", s.only(http.MethodPost, s.handleVoterChange(true)))
	mux.HandleFunc("/voters/remove", s.only(http.MethodPost, s.handleVoterChange(false)))
	mux.HandleFunc("/cursors/{name}", s.handleCursor)
	mux.HandleFunc("/leader/transfer", s.only(http.MethodPost, s.handleTransfer))
	mux.HandleFunc("/status", s.only(http.MethodGet, s.handleStatus))
	mux.HandleFunc("/compact", s.handleCompact)
}

// guard wraps an API handler for browsers. State-changing requests (POST)
// that a web page of another origin sends are refused with 403 before h
// sees them (CSRF: a page the operator visits could otherwise append to
// the log or kill nodes), unless that origin is one of trusted (the other
// nodes' dashboards). It uses http.CrossOriginProtection: the browser's
// Sec-Fetch-Site header, or else Origin compared with Host. Requests
// without either header do not come from a browser page (curl, Go
// clients) and pass: the API has no authentication of its own. CORS
// headers let only the trusted origins read the answers.
func guard(trusted []string, h http.Handler, logger hclog.Logger) http.Handler {
	cop := http.NewCrossOriginProtection()
	origins := map[string]bool{}
	for _, u := range trusted {
		list, err := originsOf(u)
		for _, o := range list {
			if err == nil {
				err = cop.AddTrustedOrigin(o)
			}
		}
		if err != nil {
			logger.Warn("not trusting the origin of a peer URL", "url", u, "error", err)
			continue
		}
		for _, o := range list {
			origins[o] = true
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger.Debug("refused a cross-origin request", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		writeJSON(w, http.StatusForbidden, apiError{Error: "cross-origin request refused: only this node's dashboard and its peers' may change state"})
	}))
	return withCORS(origins, cop.Handler(h))
}

// originsOf returns the origin (scheme://host[:port]) of an HTTP base URL
// and, for a loopback address, the same with "localhost": a dashboard
// opened as http://localhost:PORT/ is the same page on the same machine.
func originsOf(base string) ([]string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("not an http(s) URL with a host")
	}
	origins := []string{u.Scheme + "://" + u.Host}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() {
		host := "localhost"
		if p := u.Port(); p != "" {
			host += ":" + p
		}
		origins = append(origins, u.Scheme+"://"+host)
	}
	return origins, nil
}

// withCORS lets pages from the trusted origins read the API's answers:
// the dashboard of one node reads the status of the others and the demo's
// control API. Other origins get no CORS headers, so browsers hide the
// answers from them.
func withCORS(trusted map[string]bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if origin != "" && trusted[origin] {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type, "+idempotencyHeader)
			w.Header().Set("Access-Control-Expose-Headers", replayedHeader)
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// only answers 405 (as JSON) to other methods than method (HEAD counts as GET).
func (s *server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "method " + r.Method + " not allowed; use " + method})
			return
		}
		h(w, r)
	}
}

// appendJSON is /append's answer.
type appendJSON struct {
	Offset uint64 `json:"offset"`
	// Duplicate: the request's Idempotency-Key was appended before (within
	// replog's DedupWindow) at Offset; nothing was appended now.
	Duplicate bool `json:"duplicate,omitempty"`
}

// handleAppend appends the raw request body as one record. An
// Idempotency-Key header (1 to replog.MaxIDLength bytes) becomes the
// append's ID (replog.WithID): a request with a key appended before,
// within the dedup window, appends nothing and is answered 200 with the
// first one's offset, "duplicate": true and the header
// Idempotent-Replayed: true, so a client may retry an unknown outcome
// with the same key.
func (s *server) handleAppend(w http.ResponseWriter, r *http.Request) {
	var opts []replog.AppendOption
	if key, ok := r.Header[idempotencyHeader]; ok {
		if len(key) != 1 || key[0] == "" || len(key[0]) > replog.MaxIDLength {
			writeJSON(w, http.StatusBadRequest, apiError{Code: codeBadKey, Outcome: outcomeFailed,
				Error: "one " + idempotencyHeader + " of 1 to " + strconv.Itoa(replog.MaxIDLength) + " bytes"})
			return
		}
		opts = append(opts, replog.WithID(key[0]))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxRecord))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{
				Error:   "record larger than " + strconv.FormatInt(s.maxRecord, 10) + " bytes",
				Code:    codeTooLarge,
				Outcome: outcomeFailed,
			})
			return
		}
		writeJSON(w, http.StatusBadRequest, apiError{Error: "reading body: " + err.Error(), Code: codeBadRequest, Outcome: outcomeFailed})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.appendTimeout)
	defer cancel()
	off, err := s.node.Append(ctx, data, opts...)
	// -append-timeout may exceed the server's WriteTimeout: the answer
	// (the outcome) must still reach the client.
	extend(http.NewResponseController(w))
	if errors.Is(err, replog.ErrDuplicate) {
		w.Header().Set(replayedHeader, "true")
		writeJSON(w, http.StatusOK, appendJSON{Offset: off, Duplicate: true})
		return
	}
	if err != nil {
		code, body := s.appendError(err)
		s.logger.Debug("append failed", "status", code, "outcome", body.Outcome, "code", body.Code, "error", err)
		writeJSON(w, code, body)
		return
	}
	writeJSON(w, http.StatusOK, appendJSON{Offset: off})
}

// appendError maps an Append error to a status code and body. The order
// matters: an error may wrap several sentinels (e.g. ErrClosed together
// with ErrUnknownOutcome), and "unknown" must win over "failed", because
// "failed" promises the record is not in the log. An unknown outcome the
// library reports is 503 or 504 with a code, never 500: 500 is kept for
// server faults (a failed disk, an error the API does not know), so a
// client can tell "retry with the same key" from "something is broken".
func (s *server) appendError(err error) (int, apiError) {
	body := apiError{Error: err.Error(), Outcome: outcomeUnknown}
	var notLeader *replog.NotLeaderError
	switch {
	case errors.Is(err, replog.ErrTooLarge):
		body.Outcome, body.Code = outcomeFailed, codeTooLarge
		return http.StatusRequestEntityTooLarge, body
	case errors.Is(err, replog.ErrStorageFailed):
		body.Code = codeStorageFailed
		return http.StatusInternalServerError, body
	case errors.Is(err, replog.ErrUnknownOutcome):
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			body.Code = codeTimeout
			return http.StatusGatewayTimeout, body
		case errors.Is(err, replog.ErrClosed):
			body.Code = codeClosing
		default:
			body.Code = codeUnknownOutcome
		}
		return http.StatusServiceUnavailable, body
	case errors.As(err, &notLeader):
		body.Outcome, body.Code = outcomeFailed, codeNotLeader
		if notLeader.LeaderID == "" {
			body.Code = codeNoLeader
		}
		body.Leader = notLeader.LeaderID
		body.LeaderURL = s.urlOf(notLeader.LeaderID)
		return http.StatusServiceUnavailable, body
	case errors.Is(err, replog.ErrNotLeader):
		body.Outcome, body.Code = outcomeFailed, codeNotLeader
		return http.StatusServiceUnavailable, body
	case errors.Is(err, replog.ErrClosed):
		body.Outcome, body.Code = outcomeFailed, codeClosed
		return http.StatusServiceUnavailable, body
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// replog documents a bare ctx error as "not handed to the protocol",
		// but a timeout is where "maybe" is the only safe answer.
		body.Code = codeTimeout
		return http.StatusGatewayTimeout, body
	default:
		// Anything unforeseen: we cannot know.
		body.Code = codeInternal
		return http.StatusInternalServerError, body
	}
}

// urlOf returns the HTTP base URL of node id, or "" if unknown.
func (s *server) urlOf(id string) string {
	if id == "" {
		return ""
	}
	if id == s.self {
		return s.selfURL
	}
	return s.peers[id]
}

// handleEntries streams committed entries as newline-delimited JSON.
//
//	from=N        first offset (default: the node's log start)
//	follow=false  end at the node's HW as of the request; default true:
//	              stream new entries until the client goes away.
//
// An error before the first line is a JSON error with a status code; an
// error after it is a last line {"error": "..."}. With follow=true the
// headers (200) go out at once, so every later error is such a line. A
// read from below the log start (entries deleted by retention, also while
// the stream runs) fails with 416, or such a last line, carrying
// "log_start": the offset to resume from.
func (s *server) handleEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st := s.node.Status()
	from, follow := st.LogStart, true
	var err error
	if v := q.Get("from"); v != "" {
		if from, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "bad from: " + err.Error()})
			return
		}
	}
	if v := q.Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "bad follow: " + err.Error()})
			return
		}
	}
	if from < st.LogStart {
		writeJSON(w, http.StatusRequestedRangeNotSatisfiable, readError(&replog.OutOfRangeError{Offset: from, LogStart: st.LogStart}))
		return
	}
	hw := st.HighWatermark
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	if !follow && from >= hw {
		w.WriteHeader(http.StatusOK)
		return
	}

	ctx := r.Context()
	rc := http.NewResponseController(w)
	entries := s.node.Read(ctx, from)
	if !follow {
		// Bounded by offsets, not by entries: it ends even when the last
		// offsets below hw are control entries, which readers never see.
		entries = s.node.ReadRange(ctx, from, hw)
	}
	enc := json.NewEncoder(w)
	wrote := false
	if follow {
		// The stream may last for days, but the server's WriteTimeout
		// counts from the request's start: move the write deadline
		// forward before each write (extend), so that a client that stops
		// reading is still cut off. (ReadTimeout does not apply: net/http
		// lifts the read deadline once a body-less request is read.)
		// A follower of the log may wait long for the next entry: send the
		// headers now, so that it knows the stream is open.
		w.WriteHeader(http.StatusOK)
		extend(rc)
		_ = rc.Flush()
		wrote = true
	}
	for e, err := range entries {
		if err != nil {
			if ctx.Err() != nil {
				break // the client went away (or the server is stopping)
			}
			if !wrote {
				code := http.StatusInternalServerError
				if errors.Is(err, replog.ErrOutOfRange) {
					code = http.StatusRequestedRangeNotSatisfiable
				} else if errors.Is(err, replog.ErrClosed) {
					code = http.StatusServiceUnavailable
				}
				writeJSON(w, code, readError(err))
				return
			}
			if follow {
				extend(rc)
			}
			_ = enc.Encode(readError(err))
			break
		}
		wrote = true
		if follow {
			extend(rc)
		}
		if err := enc.Encode(entryJSON{Offset: e.Offset, Epoch: e.Epoch, Data: e.Data, Key: e.Key}); err != nil {
			return // client gone
		}
		if follow {
			_ = rc.Flush()
		}
	}
	if !wrote {
		w.WriteHeader(http.StatusOK)
	}
}

// readError is the API's body for a failed read: an *OutOfRangeError
// (entries deleted by retention) names the log start to resume from.
func readError(err error) apiError {
	body := apiError{Error: err.Error()}
	var oor *replog.OutOfRangeError
	if errors.As(err, &oor) {
		body.LogStart = &oor.LogStart
	}
	return body
}

// handleDeleteBefore deletes the entries below ?offset=N (Log.DeleteBefore:
// on any node; the leader moves the log start, the others follow) and
// answers the node's log start once it covers them, as far as they are
// committed (it stays below the HW). It waits at most deleteTimeout; every
// error names where the log start stands.
func (s *server) handleDeleteBefore(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query().Get("offset")
	if v == "" {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "missing offset: POST /delete-before?offset=N deletes the entries below N"})
		return
	}
	offset, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad offset: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.deleteTimeout)
	defer cancel()
	start, err := s.node.DeleteBefore(ctx, offset)
	// -delete-timeout may exceed the server's WriteTimeout.
	extend(http.NewResponseController(w))
	if err != nil {
		code, body := s.deleteError(err)
		body.LogStart = &start
		s.logger.Debug("delete-before failed", "offset", offset, "status", code, "error", err)
		writeJSON(w, code, body)
		return
	}
	writeJSON(w, http.StatusOK, deleteJSON{LogStart: start, Requested: offset, HighWatermark: s.node.Status().HighWatermark})
}

// deleteError maps a DeleteBefore error to a status code and body.
func (s *server) deleteError(err error) (int, apiError) {
	body := apiError{Error: err.Error()}
	var notLeader *replog.NotLeaderError
	switch {
	case errors.As(err, &notLeader):
		// No leader known until the deadline: maybe nothing was deleted.
		body.Leader = notLeader.LeaderID
		body.LeaderURL = s.urlOf(notLeader.LeaderID)
		return http.StatusServiceUnavailable, body
	case errors.Is(err, replog.ErrClosed):
		return http.StatusServiceUnavailable, body
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The leader may have deleted already; this node will follow.
		body.Error += " (the log start had not covered the offset yet; the leader may have deleted, this node will follow)"
		return http.StatusGatewayTimeout, body
	default:
		// ErrStorageFailed or anything unforeseen.
		return http.StatusInternalServerError, body
	}
}

// handleVoterChange serves POST /voters/add?node=ID (add true) and POST
// /voters/remove?node=ID: replog's AddVoter and RemoveVoter, on any node
// (a follower forwards to the leader). It answers once the change is
// committed, waiting at most voterTimeout: an add waits for the node to
// fetch from the leader and catch up, and either waits for another change
// in progress to commit first.
func (s *server) handleVoterChange(add bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("node")
		if id == "" {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "missing node: POST /voters/add?node=ID or /voters/remove?node=ID"})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.voterTimeout)
		defer cancel()
		change := s.node.RemoveVoter
		if add {
			change = s.node.AddVoter
		}
		err := change(ctx, id)
		// -voter-timeout may exceed the server's WriteTimeout.
		extend(http.NewResponseController(w))
		if err != nil {
			code, body := s.voterError(err)
			s.logger.Debug("voter change failed", "add", add, "node", id, "status", code, "error", err)
			writeJSON(w, code, body)
			return
		}
		writeJSON(w, http.StatusOK, votersJSON{Node: id, Voters: s.node.Status().Voters})
	}
}

// voterError maps an AddVoter or RemoveVoter error to a status code and
// body.
func (s *server) voterError(err error) (int, apiError) {
	body := apiError{Error: err.Error()}
	var notLeader *replog.NotLeaderError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The error says what it waited for: the node to fetch or catch
		// up, another change, a leader, or the outcome.
		if errors.As(err, &notLeader) {
			body.Leader, body.LeaderURL = notLeader.LeaderID, s.urlOf(notLeader.LeaderID)
		}
		return http.StatusGatewayTimeout, body
	case errors.Is(err, replog.ErrUnknownNode):
		return http.StatusNotFound, body
	case errors.Is(err, replog.ErrLastVoter):
		return http.StatusConflict, body
	case errors.Is(err, replog.ErrClosed):
		return http.StatusServiceUnavailable, body
	default:
		// ErrStorageFailed or anything unforeseen.
		return http.StatusInternalServerError, body
	}
}

// extend gives the next write of a streaming response writeTimeout from
// now.
func extend(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
}

// handleStatus returns replog.Status as JSON.
func (s *server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.node.Status())
}

// handleHistory returns the recorded status changes after ?since=SEQ.
func (s *server) handleHistory(w http.ResponseWriter, r *http.Request) {
	if s.hist == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "history disabled"})
		return
	}
	if s.sampler != nil {
		s.sampler.watch() // someone watches: sample (again)
	}
	var since uint64
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "bad since: " + err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, s.hist.since(since))
}

// handleMetrics serves the node's metrics in Prometheus' text format
// (replogprom's collector, plus the Go runtime's and the process's).
func (s *server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "metrics disabled"})
		return
	}
	s.metrics.ServeHTTP(w, r)
}

// handleConfig tells the dashboard which nodes exist and where: this
// one, the configured voters and peers, and the nodes this node's status
// names (the voters in force and, on the leader, the observers), the
// latter without a URL unless -http-peers has one.
func (s *server) handleConfig(w http.ResponseWriter, r *http.Request) {
	ids := map[string]bool{s.self: true}
	for _, v := range s.voters {
		ids[v] = true
	}
	for id := range s.peers {
		ids[id] = true
	}
	st := s.node.Status()
	for _, v := range st.Voters {
		ids[v.ID] = true
	}
	for _, o := range st.Observers {
		ids[o.ID] = true
	}
	cfg := configJSON{Self: s.self, Control: s.control}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		cfg.Nodes = append(cfg.Nodes, nodeInfo{ID: id, URL: s.urlOf(id)})
	}
	writeJSON(w, http.StatusOK, cfg)
}

// writeJSON writes v as the JSON response body with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
