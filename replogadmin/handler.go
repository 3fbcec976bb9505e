package replogadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replog-io/replog"
)

// ErrInvalidOptions wraps every error of Options.Validate and New; the
// message names the field.
var ErrInvalidOptions = errors.New("replogadmin: invalid options")

// Defaults: of a GET /entries page's limit, and of the Options fields
// left zero.
const (
	// DefaultPageEntries is a page's limit when the request names none.
	DefaultPageEntries = 100
	// DefaultMaxPageEntries is Options.MaxPageEntries's default.
	DefaultMaxPageEntries = 1000
	// DefaultMaxPageBytes is Options.MaxPageBytes's default.
	DefaultMaxPageBytes = 4 << 20
	// DefaultMaxWait is Options.MaxWait's default.
	DefaultMaxWait = 30 * time.Second
	// DefaultChangeTimeout is Options.ChangeTimeout's default.
	DefaultChangeTimeout = 30 * time.Second
)

// Options configures a Handler. The zero value is a read-only handler
// with the defaults below.
type Options struct {
	// AllowChanges turns on the routes that change the cluster: POST
	// /leader/transfer, /voters/add, /voters/remove and /delete-before.
	// Default false: they answer 403 (read_only).
	AllowChanges bool
	// MaxPageEntries bounds the entries of one GET /entries page (its
	// limit parameter is cut to it). Default DefaultMaxPageEntries (1000).
	MaxPageEntries int
	// MaxPageBytes bounds the record bytes of one GET /entries page; the
	// page's first entry is always sent, whatever its size, so that a
	// client makes progress. Default DefaultMaxPageBytes (4 MiB).
	MaxPageBytes int
	// MaxWait bounds how long one GET /entries waits for a new entry (its
	// wait parameter is cut to it). Default DefaultMaxWait (30s).
	MaxWait time.Duration
	// ChangeTimeout bounds one state change (AddVoter waits for the node
	// to catch up, a transfer for the successor). Default
	// DefaultChangeTimeout (30s).
	ChangeTimeout time.Duration
}

// Validate reports the first field that is out of range, as an error
// wrapping ErrInvalidOptions that names it. Zero fields take their
// defaults and are valid.
func (o Options) Validate() error {
	switch {
	case o.MaxPageEntries < 0:
		return fmt.Errorf("%w: MaxPageEntries %d is negative", ErrInvalidOptions, o.MaxPageEntries)
	case o.MaxPageBytes < 0:
		return fmt.Errorf("%w: MaxPageBytes %d is negative", ErrInvalidOptions, o.MaxPageBytes)
	case o.MaxWait < 0:
		return fmt.Errorf("%w: MaxWait %v is negative", ErrInvalidOptions, o.MaxWait)
	case o.ChangeTimeout < 0:
		return fmt.Errorf("%w: ChangeTimeout %v is negative", ErrInvalidOptions, o.ChangeTimeout)
	}
	return nil
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.MaxPageEntries == 0 {
		o.MaxPageEntries = DefaultMaxPageEntries
	}
	if o.MaxPageBytes == 0 {
		o.MaxPageBytes = DefaultMaxPageBytes
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.ChangeTimeout == 0 {
		o.ChangeTimeout = DefaultChangeTimeout
	}
	return o
}

// Handler serves one node's admin API (see the package doc for its
// routes): of one Log (New), or of a Node's logs (NewNode). It is safe
// for concurrent use.
type Handler struct {
	log    *replog.Log  // the log the routes at the root serve
	node   *replog.Node // nil for a Log's handler
	opts   Options
	routes map[string]route
	// cop refuses state changes sent by web pages of other origins.
	cop *http.CrossOriginProtection
}

// route is one path of the API.
type route struct {
	method string
	change bool // changes the cluster: needs AllowChanges
	serve  func(w http.ResponseWriter, r *http.Request, l *replog.Log)
	doc    string
}

// New returns the admin handler of l. opts is copied (the caller's is
// never modified). Errors wrap ErrInvalidOptions: opts.Validate's, or a
// nil l.
func New(l *replog.Log, opts Options) (*Handler, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: a nil *replog.Log", ErrInvalidOptions)
	}
	return newHandler(l, nil, opts)
}

// NewNode returns the admin handler of node n: every route of New's, at
// the same paths, for n's default log; GET /logs, the logs of n's catalog
// with each one's state here; and under /logs/NAME/ every route for the
// named log NAME, open on n (the package doc has the routes). opts is
// copied. Errors wrap ErrInvalidOptions: opts.Validate's, or a nil n.
func NewNode(n *replog.Node, opts Options) (*Handler, error) {
	if n == nil {
		return nil, fmt.Errorf("%w: a nil *replog.Node", ErrInvalidOptions)
	}
	return newHandler(n.Default(), n, opts)
}

func newHandler(l *replog.Log, n *replog.Node, opts Options) (*Handler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{log: l, node: n, opts: opts.withDefaults(), cop: http.NewCrossOriginProtection()}
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, apiError{Code: codeCrossOrigin,
			Error: "cross-origin request refused: a web page of another origin may not change the cluster"})
	}))
	h.routes = map[string]route{
		"/":                {method: http.MethodGet, serve: h.serveIndex, doc: "this list"},
		"/status":          {method: http.MethodGet, serve: h.serveStatus, doc: "replog.Status"},
		"/voters":          {method: http.MethodGet, serve: h.serveVoters, doc: "the voter set in force"},
		"/followers":       {method: http.MethodGet, serve: h.serveFollowers, doc: "on the leader, each follower's LEO and lag"},
		"/stats":           {method: http.MethodGet, serve: h.serveStats, doc: "replog.Stats"},
		"/entries":         {method: http.MethodGet, serve: h.serveEntries, doc: "committed entries: ?from=N&limit=M&wait=D"},
		"/leader/transfer": {method: http.MethodPost, change: true, serve: h.serveTransfer, doc: "hand the leadership over: ?to=ID (\"\": the most caught-up voter)"},
		"/voters/add":      {method: http.MethodPost, change: true, serve: h.serveVoterChange(true), doc: "make a node a voter: ?node=ID"},
		"/voters/remove":   {method: http.MethodPost, change: true, serve: h.serveVoterChange(false), doc: "remove a voter: ?node=ID"},
		"/delete-before":   {method: http.MethodPost, change: true, serve: h.serveDeleteBefore, doc: "delete the entries below ?offset=N"},
	}
	if n != nil {
		h.routes["/logs"] = route{method: http.MethodGet, serve: h.serveLogs, doc: "the node's logs (the default log first), each with its replicas and, where open here, its leader, LEO and HW"}
	}
	return h, nil
}

// ServeHTTP serves the admin API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == "" {
		path = "/" // mounted with http.StripPrefix("/admin", ...) and asked for /admin
	}
	l := h.log
	if rest, ok := strings.CutPrefix(path, "/logs/"); ok && h.node != nil {
		name, sub, _ := strings.Cut(rest, "/")
		var status int
		var body apiError
		if l, status, body = h.namedLog(name); l == nil {
			writeError(w, status, body)
			return
		}
		path = "/" + sub
		if path == "/logs" {
			path = "" // the list is the node's, not a log's
		}
	}
	rt, ok := h.routes[path]
	if !ok {
		writeError(w, http.StatusNotFound, apiError{Code: codeNotFound, Error: "no admin route " + r.URL.Path + " (GET / lists them)"})
		return
	}
	if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", rt.method)
		writeError(w, http.StatusMethodNotAllowed, apiError{Code: codeMethodNotAllowed, Error: fmt.Sprintf("%s %s: use %s", r.Method, path, rt.method)})
		return
	}
	if rt.change && !h.opts.AllowChanges {
		writeError(w, http.StatusForbidden, apiError{Code: codeReadOnly,
			Error: "this admin handler is read-only: the service did not allow state changes (replogadmin.Options.AllowChanges)"})
		return
	}
	if rt.change {
		h.cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.serve(w, r, l) })).ServeHTTP(w, r)
		return
	}
	rt.serve(w, r, l)
}

// indexJSON is GET /'s answer.
type indexJSON struct {
	Routes         []routeJSON `json:"routes"`
	ChangesAllowed bool        `json:"changes_allowed"`
}

type routeJSON struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Doc    string `json:"doc"`
}

func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request, _ *replog.Log) {
	idx := indexJSON{ChangesAllowed: h.opts.AllowChanges}
	for _, p := range slices.Sorted(maps.Keys(h.routes)) {
		rt := h.routes[p]
		if rt.change && !h.opts.AllowChanges {
			continue
		}
		idx.Routes = append(idx.Routes, routeJSON{Method: rt.method, Path: p, Doc: rt.doc})
	}
	writeJSON(w, http.StatusOK, idx)
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	writeJSON(w, http.StatusOK, l.Status())
}

// VotersJSON is GET /voters's answer (and that of a voter change): the
// voter set in force on this node.
type VotersJSON struct {
	// Voters are the voters in force, in their recorded order; CaughtUp
	// is known on the leader only.
	Voters []replog.VoterStatus `json:"voters"`
	// VotersOffset is the offset of the entry that recorded them.
	VotersOffset uint64 `json:"voters_offset"`
	// LeaderID is the leader this node knows ("" for none).
	LeaderID string `json:"leader_id"`
	// Observers and Replacing are known on the leader only (see
	// replog.Status).
	Observers []replog.Incarnation `json:"observers,omitempty"`
	Replacing []replog.Incarnation `json:"replacing,omitempty"`
	// Node is the node a voter change named (absent on GET /voters).
	Node string `json:"node,omitempty"`
}

func votersOf(st replog.Status) VotersJSON {
	return VotersJSON{Voters: st.Voters, VotersOffset: st.VotersOffset, LeaderID: st.LeaderID, Observers: st.Observers, Replacing: st.Replacing}
}

func (h *Handler) serveVoters(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	writeJSON(w, http.StatusOK, votersOf(l.Status()))
}

// FollowersJSON is GET /followers's answer, on the leader.
type FollowersJSON struct {
	// LeaderID is this node, the leader; LEO its log end offset.
	LeaderID string `json:"leader_id"`
	LEO      uint64 `json:"leo"`
	// Followers are the other voters, sorted by ID.
	Followers []FollowerJSON `json:"followers"`
}

// FollowerJSON is one follower as the leader sees it.
type FollowerJSON struct {
	ID string `json:"id"`
	// LEO is the follower's LEO as its last fetch told the leader;
	// Behind is the leader's LEO minus it: offsets it has still to fetch
	// (control entries included).
	LEO    uint64 `json:"leo"`
	Behind uint64 `json:"behind"`
	// CaughtUp: its latest fetch asked for the leader's high watermark or
	// more (what AddVoter waits for).
	CaughtUp bool `json:"caught_up"`
}

func (h *Handler) serveFollowers(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	st := l.Status()
	if st.Role != replog.RoleLeader {
		writeError(w, http.StatusConflict, notLeader(st.NodeID, st.LeaderID, "only the leader knows its followers' lag"))
		return
	}
	out := FollowersJSON{LeaderID: st.NodeID, LEO: st.LEO, Followers: []FollowerJSON{}}
	for _, id := range slices.Sorted(maps.Keys(st.RemoteLEO)) {
		leo := st.RemoteLEO[id]
		f := FollowerJSON{ID: id, LEO: leo, Behind: st.LEO - min(leo, st.LEO)}
		for _, v := range st.Voters {
			if v.ID == id {
				f.CaughtUp = v.CaughtUp
			}
		}
		out.Followers = append(out.Followers, f)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) serveStats(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	writeJSON(w, http.StatusOK, l.Stats())
}

// PageJSON is GET /entries's answer.
type PageJSON struct {
	Entries []EntryJSON `json:"entries"`
	// Next is the offset to ask for the next page from: after the last
	// entry, or this node's readable high watermark when the page reached
	// it (the offsets between may hold control entries).
	Next uint64 `json:"next"`
	// HW is this node's readable high watermark as the page was read;
	// LogStart its log start.
	HW       uint64 `json:"hw"`
	LogStart uint64 `json:"log_start"`
}

// EntryJSON is one committed entry (replog.Entry).
type EntryJSON struct {
	Offset uint64 `json:"offset"`
	Epoch  uint64 `json:"epoch"`
	// Time is when the leader appended it (absent if unknown).
	Time time.Time `json:"time,omitzero"`
	// Data is the record (base64 in JSON).
	Data []byte `json:"data"`
}

func (h *Handler) serveEntries(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	q := r.URL.Query()
	st := l.Status()
	from, limit, wait := st.LogStart, DefaultPageEntries, time.Duration(0)
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Error: fmt.Sprintf("from=%q is not an offset", v)})
			return
		}
		from = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Error: fmt.Sprintf("limit=%q: want a number of entries, at least 1", v)})
			return
		}
		limit = n
	}
	limit = min(limit, h.opts.MaxPageEntries)
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Error: fmt.Sprintf("wait=%q: want a duration such as 10s", v)})
			return
		}
		wait = min(d, h.opts.MaxWait)
	}
	if from < st.LogStart {
		writeError(w, http.StatusRequestedRangeNotSatisfiable, readError(&replog.OutOfRangeError{Offset: from, LogStart: st.LogStart}))
		return
	}
	ctx := r.Context()
	page := PageJSON{Entries: []EntryJSON{}, Next: from}
	hw := st.ReadableHW
	if from >= hw && wait > 0 {
		// Nothing to send yet: wait for the first entry, then take what
		// else is committed by then without waiting again.
		extendWrite(w, wait)
		wctx, cancel := context.WithTimeout(ctx, wait)
		for e, err := range l.Read(wctx, from) {
			if err != nil {
				if wctx.Err() != nil && ctx.Err() == nil {
					break // waited long enough: an empty page
				}
				cancel()
				readFailed(w, ctx, err)
				return
			}
			page.Entries = append(page.Entries, entryJSON(e))
			page.Next = e.Offset + 1
			break
		}
		cancel()
		hw = l.Status().ReadableHW
	}
	budget := h.opts.MaxPageBytes
	for _, e := range page.Entries {
		budget -= len(e.Data)
	}
	full := len(page.Entries) >= limit
	if !full {
		for e, err := range l.ReadRange(ctx, page.Next, hw) {
			if err != nil {
				readFailed(w, ctx, err)
				return
			}
			if len(page.Entries) > 0 && len(e.Data) > budget {
				full = true
				break
			}
			budget -= len(e.Data)
			page.Entries = append(page.Entries, entryJSON(e))
			page.Next = e.Offset + 1
			if len(page.Entries) >= limit {
				full = true
				break
			}
		}
	}
	if !full {
		page.Next = max(page.Next, hw)
	}
	page.HW, page.LogStart = hw, l.Status().LogStart
	writeJSON(w, http.StatusOK, page)
}

func entryJSON(e replog.Entry) EntryJSON {
	return EntryJSON{Offset: e.Offset, Epoch: e.Epoch, Time: e.Time, Data: e.Data}
}

// readFailed answers a read's error (nothing if the client went away).
func readFailed(w http.ResponseWriter, ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	code, body := errorStatus(err)
	if errors.Is(err, replog.ErrOutOfRange) {
		body = readError(err)
		code = http.StatusRequestedRangeNotSatisfiable
	}
	writeError(w, code, body)
}

// readError is the body of a read below the log start: it names the log
// start to resume from.
func readError(err error) apiError {
	body := apiError{Code: codeOutOfRange, Error: err.Error()}
	var oor *replog.OutOfRangeError
	if errors.As(err, &oor) {
		body.LogStart = &oor.LogStart
	}
	return body
}

// TransferJSON is POST /leader/transfer's answer.
type TransferJSON struct {
	// LeaderID is the leader this node knows once the transfer is done.
	LeaderID string `json:"leader_id"`
	Epoch    uint64 `json:"epoch"`
}

func (h *Handler) serveTransfer(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	to := r.URL.Query().Get("to")
	ctx, cancel := h.changeContext(w, r)
	defer cancel()
	if err := l.TransferLeadership(ctx, to); err != nil {
		code, body := errorStatus(err)
		var nl *replog.NotLeaderError
		if errors.As(err, &nl) && ctx.Err() == nil {
			// TransferLeadership is the leader's to call: say where.
			code, body = http.StatusConflict, notLeader(l.Status().NodeID, nl.LeaderID, "a transfer is made on the leader")
		}
		writeError(w, code, body)
		return
	}
	st := l.Status()
	writeJSON(w, http.StatusOK, TransferJSON{LeaderID: st.LeaderID, Epoch: st.Epoch})
}

func (h *Handler) serveVoterChange(add bool) func(http.ResponseWriter, *http.Request, *replog.Log) {
	return func(w http.ResponseWriter, r *http.Request, l *replog.Log) {
		node := r.URL.Query().Get("node")
		if node == "" {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Error: "missing node: POST /voters/add?node=ID or /voters/remove?node=ID"})
			return
		}
		ctx, cancel := h.changeContext(w, r)
		defer cancel()
		change := l.RemoveVoter
		if add {
			change = l.AddVoter
		}
		if err := change(ctx, node); err != nil {
			code, body := errorStatus(err)
			writeError(w, code, body)
			return
		}
		out := votersOf(l.Status())
		out.Node = node
		writeJSON(w, http.StatusOK, out)
	}
}

// DeleteJSON is POST /delete-before's answer.
type DeleteJSON struct {
	// LogStart is this node's log start once it covered the deletion: the
	// offset asked for, or a little less (only committed entries go, and
	// the last committed one stays).
	LogStart  uint64 `json:"log_start"`
	Requested uint64 `json:"requested"`
	HW        uint64 `json:"hw"`
}

func (h *Handler) serveDeleteBefore(w http.ResponseWriter, r *http.Request, l *replog.Log) {
	v := r.URL.Query().Get("offset")
	off, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Error: fmt.Sprintf("offset=%q: POST /delete-before?offset=N deletes the entries below offset N", v)})
		return
	}
	ctx, cancel := h.changeContext(w, r)
	defer cancel()
	start, err := l.DeleteBefore(ctx, off)
	if err != nil {
		code, body := errorStatus(err)
		body.LogStart = &start
		writeError(w, code, body)
		return
	}
	writeJSON(w, http.StatusOK, DeleteJSON{LogStart: start, Requested: off, HW: l.Status().HighWatermark})
}

// changeContext bounds a state change by ChangeTimeout and the request,
// and lets the answer out after it even if the server's WriteTimeout is
// shorter: the outcome of a change must reach the client.
func (h *Handler) changeContext(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	extendWrite(w, h.opts.ChangeTimeout)
	return context.WithTimeout(r.Context(), h.opts.ChangeTimeout)
}

// extendWrite moves the response's write deadline to d (and a margin)
// from now, where the server supports it.
func extendWrite(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + 10*time.Second))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
