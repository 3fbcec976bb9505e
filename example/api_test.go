package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/testwait"
)

// fakeNode is an in-memory stand-in for *replog.Log: a committed log where
// some offsets are control entries (never shown to readers, like replog's
// epoch-start entries).
type fakeNode struct {
	mu      sync.Mutex
	status  replog.Status
	data    map[uint64][]byte // offset -> record; offsets below HW not in it are control entries
	changed chan struct{}     // closed and replaced when the HW moves
	readErr error             // if set, Read yields it after the entries below HW

	appendErr   error
	appendDelay time.Duration // Append waits this long first
	appendOff   uint64
	appendGot   [][]byte
	appendCtxs  []context.Context
	appendOpts  []int // the number of options of each call

	deleteErr  error // DeleteBefore fails with it (log start unchanged)
	deleteGot  []uint64
	deleteCtxs []context.Context

	voterErr  error    // AddVoter and RemoveVoter fail with it
	voterGot  []string // "add ID" or "remove ID", in call order
	voterCtxs []context.Context

	transferErr  error    // TransferLeadership fails with it
	transferGot  []string // the successors asked for, in call order
	transferCtxs []context.Context

	cursors    map[string]uint64
	cursorErr  error // CommitCursor and Cursor fail with it
	cursorCtxs []context.Context
}

func newFakeNode() *fakeNode {
	return &fakeNode{
		status: replog.Status{NodeID: "n1", Role: "follower", Epoch: 3, LeaderID: "n2", Voters: []replog.VoterStatus{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}},
		data:   map[uint64][]byte{},
	}
}

// commit adds a data entry at the current LEO and moves LEO and HW past it.
func (f *fakeNode) commit(data string) { f.commitEntry([]byte(data)) }

// commitControl adds a control entry (invisible to readers).
func (f *fakeNode) commitControl() { f.commitEntry(nil) }

func (f *fakeNode) commitEntry(data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if data != nil {
		f.data[f.status.LEO] = data
	}
	f.status.LEO++
	f.status.DurableLEO = f.status.LEO
	f.status.HighWatermark = f.status.LEO
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

func (f *fakeNode) Append(ctx context.Context, data []byte, opts ...replog.AppendOption) (uint64, error) {
	f.mu.Lock()
	delay := f.appendDelay
	f.mu.Unlock()
	time.Sleep(delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appendGot = append(f.appendGot, data)
	f.appendCtxs = append(f.appendCtxs, ctx)
	f.appendOpts = append(f.appendOpts, len(opts))
	return f.appendOff, f.appendErr
}

// CommitCursor records name's position, or fails with cursorErr.
func (f *fakeNode) CommitCursor(ctx context.Context, name string, next uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cursorCtxs = append(f.cursorCtxs, ctx)
	if f.cursorErr != nil {
		return f.cursorErr
	}
	if f.cursors == nil {
		f.cursors = map[string]uint64{}
	}
	f.cursors[name] = next
	return nil
}

// Cursor returns name's position: replog.ErrNoCursor if never committed,
// cursorErr if set.
func (f *fakeNode) Cursor(ctx context.Context, name string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cursorCtxs = append(f.cursorCtxs, ctx)
	if f.cursorErr != nil {
		return 0, f.cursorErr
	}
	next, ok := f.cursors[name]
	if !ok {
		return 0, fmt.Errorf("replog: cursor %s: %w", name, replog.ErrNoCursor)
	}
	return next, nil
}

func (f *fakeNode) Read(ctx context.Context, from uint64) iter.Seq2[replog.Entry, error] {
	return f.ReadRange(ctx, from, math.MaxUint64)
}

func (f *fakeNode) ReadRange(ctx context.Context, from, to uint64) iter.Seq2[replog.Entry, error] {
	return func(yield func(replog.Entry, error) bool) {
		next := from
		for {
			f.mu.Lock()
			hw, start := min(f.status.HighWatermark, to), f.status.LogStart
			if f.changed == nil {
				f.changed = make(chan struct{})
			}
			changed, readErr := f.changed, f.readErr
			var batch []replog.Entry
			if next >= start {
				for ; next < hw; next++ {
					if d, ok := f.data[next]; ok {
						batch = append(batch, replog.Entry{Offset: next, Epoch: f.status.Epoch, Data: slices.Clone(d)})
					}
				}
			}
			f.mu.Unlock()
			if next < start {
				// As replog's reader: also when the entries under a
				// running reader went.
				yield(replog.Entry{}, &replog.OutOfRangeError{Offset: next, LogStart: start})
				return
			}
			for _, e := range batch {
				if !yield(e, nil) {
					return
				}
			}
			if readErr != nil {
				yield(replog.Entry{}, readErr)
				return
			}
			if next >= to {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				yield(replog.Entry{}, ctx.Err())
				return
			}
		}
	}
}

// DeleteBefore moves the log start to min(offset, HW), as the real one
// does on a leader, unless deleteErr is set.
func (f *fakeNode) DeleteBefore(ctx context.Context, offset uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteGot = append(f.deleteGot, offset)
	f.deleteCtxs = append(f.deleteCtxs, ctx)
	if f.deleteErr != nil {
		return f.status.LogStart, f.deleteErr
	}
	if t := min(offset, f.status.HighWatermark); t > f.status.LogStart {
		f.status.LogStart = t
		for o := range f.data {
			if o < t {
				delete(f.data, o)
			}
		}
		if f.changed != nil {
			close(f.changed)
			f.changed = nil
		}
	}
	return f.status.LogStart, nil
}

// AddVoter records the call and fails with voterErr, or adds id to the
// voters.
func (f *fakeNode) AddVoter(ctx context.Context, id string) error {
	return f.voterChange(ctx, "add", id)
}

// RemoveVoter records the call and fails with voterErr, or removes id.
func (f *fakeNode) RemoveVoter(ctx context.Context, id string) error {
	return f.voterChange(ctx, "remove", id)
}

func (f *fakeNode) voterChange(ctx context.Context, op, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.voterGot = append(f.voterGot, op+" "+id)
	f.voterCtxs = append(f.voterCtxs, ctx)
	if f.voterErr != nil {
		return f.voterErr
	}
	f.status.Voters = slices.DeleteFunc(slices.Clone(f.status.Voters), func(v replog.VoterStatus) bool { return v.ID == id })
	if op == "add" {
		f.status.Voters = append(f.status.Voters, replog.VoterStatus{ID: id, DirectoryID: "dir-" + id, CaughtUp: true})
	}
	return nil
}

// TransferLeadership records the call and fails with transferErr, or
// makes to (or "n3" for "") the leader this node follows.
func (f *fakeNode) TransferLeadership(ctx context.Context, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transferGot = append(f.transferGot, to)
	f.transferCtxs = append(f.transferCtxs, ctx)
	if f.transferErr != nil {
		return f.transferErr
	}
	if to == "" {
		to = "n3"
	}
	f.status.Role, f.status.LeaderID = replog.RoleFollower, to
	return nil
}

func (f *fakeNode) Status() replog.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.Voters = slices.Clone(st.Voters)
	st.Observers = slices.Clone(st.Observers)
	return st
}

func newTestServer(node logNode) *server {
	return &server{
		node:          node,
		self:          "n1",
		selfURL:       "http://n1.test",
		peers:         map[string]string{"n2": "http://n2.test", "n3": "http://n3.test"},
		voters:        []string{"n1", "n2", "n3"},
		control:       "http://control.test",
		appendTimeout: 5 * time.Second,
		deleteTimeout: 5 * time.Second,
		voterTimeout:  5 * time.Second,
		maxRecord:     64,
		hist:          newHistory(8),
		logger:        hclog.NewNullLogger(),
	}
}

func do(t *testing.T, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeJSON(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json (body %q)", ct, rec.Body.String())
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", rec.Body.String(), err)
	}
	return m
}

func TestAppendStatusCodes(t *testing.T) {
	deadline := context.DeadlineExceeded
	tests := []struct {
		name    string
		err     error
		code    int
		body    map[string]any
		wantMsg string
	}{
		{"committed", nil, 200, map[string]any{"offset": 7.0}, ""},
		{"not leader, leader known", fmt.Errorf("%w (%w)", &replog.NotLeaderError{LeaderID: "n2"}, deadline), 503,
			map[string]any{"outcome": "failed", "leader": "n2", "leader_url": "http://n2.test"}, "not the leader"},
		{"not leader, leader is self URL", &replog.NotLeaderError{LeaderID: "n1"}, 503,
			map[string]any{"outcome": "failed", "leader": "n1", "leader_url": "http://n1.test"}, "not the leader"},
		{"no leader known", &replog.NotLeaderError{}, 503, map[string]any{"outcome": "failed"}, "no leader"},
		{"bare ErrNotLeader", replog.ErrNotLeader, 503, map[string]any{"outcome": "failed"}, "not the leader"},
		{"closed", replog.ErrClosed, 503, map[string]any{"outcome": "failed"}, "closed"},
		{"closed mid-flight", fmt.Errorf("%w: %w", replog.ErrClosed, replog.ErrUnknownOutcome), 503,
			map[string]any{"outcome": "unknown", "code": "closing"}, "outcome unknown"},
		{"leadership lost", fmt.Errorf("epoch 4: %w", replog.ErrUnknownOutcome), 503, map[string]any{"outcome": "unknown", "code": "unknown_outcome"}, "outcome unknown"},
		{"timeout after handing over", fmt.Errorf("%w (%w)", replog.ErrUnknownOutcome, deadline), 504,
			map[string]any{"outcome": "unknown"}, "outcome unknown"},
		{"bare timeout", deadline, 504, map[string]any{"outcome": "unknown"}, "deadline"},
		{"too large", fmt.Errorf("%w: 2 MiB", replog.ErrTooLarge), 413, map[string]any{"outcome": "failed"}, "too large"},
		{"disk failure", errors.New("bolt: disk on fire"), 500, map[string]any{"outcome": "unknown"}, "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			f.appendOff, f.appendErr = 7, tt.err
			rec := do(t, newTestServer(f).handler(), "POST", "/append", "hello")
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d (body %s)", rec.Code, tt.code, rec.Body)
			}
			m := decodeJSON(t, rec)
			for k, v := range tt.body {
				if m[k] != v {
					t.Errorf("%s = %#v, want %#v (body %s)", k, m[k], v, rec.Body)
				}
			}
			if tt.err == nil {
				if len(m) != 1 {
					t.Errorf("success body %s has extra fields", rec.Body)
				}
			} else {
				msg, _ := m["error"].(string)
				if !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("error %q does not mention %q", msg, tt.wantMsg)
				}
				if _, ok := tt.body["leader"]; !ok {
					if _, has := m["leader"]; has {
						t.Errorf("unexpected leader in %s", rec.Body)
					}
				}
			}
			if len(f.appendGot) != 1 || string(f.appendGot[0]) != "hello" {
				t.Errorf("Append got %q, want one call with %q", f.appendGot, "hello")
			}
			if _, ok := f.appendCtxs[0].Deadline(); !ok {
				t.Errorf("Append's context has no deadline: a lost leader would hang the request")
			}
		})
	}
}

func TestAppendBodyTooLarge(t *testing.T) {
	f := newFakeNode()
	s := newTestServer(f)
	rec := do(t, s.handler(), "POST", "/append", strings.Repeat("x", int(s.maxRecord)+1))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", rec.Code)
	}
	if m := decodeJSON(t, rec); m["outcome"] != "failed" {
		t.Errorf("outcome %v, want failed", m["outcome"])
	}
	if len(f.appendGot) != 0 {
		t.Errorf("Append was called with an oversized record")
	}
	// Exactly the limit is fine.
	if rec := do(t, s.handler(), "POST", "/append", strings.Repeat("x", int(s.maxRecord))); rec.Code != 200 {
		t.Errorf("record of exactly maxRecord bytes: status %d, want 200", rec.Code)
	}
}

func TestMethodsAndRoutes(t *testing.T) {
	h := newTestServer(newFakeNode()).handler()
	tests := []struct {
		method, target string
		code           int
		contentType    string
		allow          string
	}{
		{"GET", "/append", 405, "application/json", "POST"},
		{"POST", "/status", 405, "application/json", "GET"},
		{"DELETE", "/entries", 405, "application/json", "GET"},
		{"GET", "/nope", 404, "application/json", ""},
		{"GET", "/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/static/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/static/style.css", 200, "text/css; charset=utf-8", ""},
		{"GET", "/status", 200, "application/json", ""},
		{"GET", "/config", 200, "application/json", ""},
		{"GET", "/history", 200, "application/json", ""},
		{"GET", "/entries?from=x", 400, "application/json", ""},
		{"GET", "/entries?follow=maybe", 400, "application/json", ""},
		{"GET", "/history?since=-1", 400, "application/json", ""},
		{"GET", "/metrics", 404, "application/json", ""}, // the test server has no metrics
		{"POST", "/metrics", 405, "application/json", "GET"},
		{"GET", "/delete-before?offset=1", 405, "application/json", "POST"},
		{"POST", "/delete-before", 400, "application/json", ""},
		{"GET", "/voters/add?node=n4", 405, "application/json", "POST"},
		{"POST", "/voters/add", 400, "application/json", ""},
		{"POST", "/voters/remove", 400, "application/json", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			// As n2's dashboard sends it.
			req := httptest.NewRequest(tt.method, tt.target, nil)
			req.Header.Set("Origin", "http://n2.test")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d (body %.200s)", rec.Code, tt.code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != tt.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tt.contentType)
			}
			if got := rec.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "http://n2.test" {
				t.Errorf("Access-Control-Allow-Origin %q, want http://n2.test (a peer's dashboard)", got)
			}
			if tt.contentType == "application/json" {
				m := decodeJSON(t, rec)
				if tt.code >= 400 && m["error"] == "" {
					t.Errorf("error body without error message: %s", rec.Body)
				}
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	rec := do(t, newTestServer(newFakeNode()).handler(), "OPTIONS", "/append", "")
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d, want 204", rec.Code)
	}
	if got := rec.Header().Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
		t.Errorf("Allow-Methods %q lacks POST", got)
	}
}

func TestStatusJSONShape(t *testing.T) {
	f := newFakeNode()
	f.status.Role, f.status.LeaderID = "leader", "n1"
	f.status.RemoteLEO = map[string]uint64{"n2": 4, "n3": 5}
	f.status.LEO, f.status.HighWatermark, f.status.DurableLEO = 5, 4, 5
	f.status.FeatureLevel, f.status.SupportedLevels = 7, [2]int{6, 7}
	rec := do(t, newTestServer(f).handler(), "GET", "/status", "")
	m := decodeJSON(t, rec)
	want := []string{"node_id", "role", "epoch", "leader_id", "voters", "voters_offset", "directory_id", "leo", "durable_leo", "hw", "readable_hw", "log_start", "remote_leo", "rpc_addr", "gossip_addr", "feature_level", "supported_levels"}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("status fields %v, want %v", got, want)
	}
	if m["role"] != "leader" || m["leo"] != 5.0 || m["hw"] != 4.0 || m["feature_level"] != 7.0 {
		t.Errorf("status %s has wrong values", rec.Body)
	}
	if r, _ := m["remote_leo"].(map[string]any); r["n2"] != 4.0 || r["n3"] != 5.0 {
		t.Errorf("remote_leo %v, want n2=4 n3=5", m["remote_leo"])
	}
	if r, _ := m["supported_levels"].([]any); len(r) != 2 || r[0] != 6.0 || r[1] != 7.0 {
		t.Errorf("supported_levels %v, want [6 7]", m["supported_levels"])
	}
}

func TestConfig(t *testing.T) {
	s := newTestServer(newFakeNode())
	s.voters = []string{"n3", "n1", "n4"} // n4: a voter without a known URL
	// The status names a voter added since (n5) and an observer (n6).
	f := s.node.(*fakeNode)
	f.status.Voters = append(f.status.Voters, replog.VoterStatus{ID: "n5"})
	f.status.Observers = []replog.Incarnation{{ID: "n6", DirectoryID: "d6"}}
	rec := do(t, s.handler(), "GET", "/config", "")
	var cfg configJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &cfg); err != nil {
		t.Fatal(err)
	}
	want := configJSON{Self: "n1", Control: "http://control.test", Nodes: []nodeInfo{
		{"n1", "http://n1.test"}, {"n2", "http://n2.test"}, {"n3", "http://n3.test"}, {"n4", ""}, {"n5", ""}, {"n6", ""},
	}}
	if fmt.Sprint(cfg) != fmt.Sprint(want) {
		t.Errorf("config %+v, want %+v", cfg, want)
	}
}

// readLines parses an /entries body.
func readLines(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func offsets(lines []map[string]any) []uint64 {
	var out []uint64
	for _, l := range lines {
		if o, ok := l["offset"].(float64); ok {
			out = append(out, uint64(o))
		}
	}
	return out
}

func TestEntriesNoFollow(t *testing.T) {
	f := newFakeNode()
	f.commitControl() // offset 0: an epoch-start entry
	for _, d := range []string{"a", "b", "c"} {
		f.commit(d) // offsets 1..3
	}
	f.commitControl() // offset 4: the last entry below the HW is a control entry
	f.commit("e")     // offset 5
	h := newTestServer(f).handler()

	tests := []struct {
		target string
		want   []uint64
	}{
		{"/entries?follow=false", []uint64{1, 2, 3, 5}},
		{"/entries?from=2&follow=false", []uint64{2, 3, 5}},
		{"/entries?from=5&follow=false", []uint64{5}},
		{"/entries?from=6&follow=false", nil},
		{"/entries?from=600&follow=false", nil},
	}
	for _, tt := range tests {
		rec := do(t, h, "GET", tt.target, "")
		if rec.Code != 200 {
			t.Fatalf("%s: status %d (%s)", tt.target, rec.Code, rec.Body)
		}
		lines := readLines(t, rec.Body.String())
		if got := offsets(lines); !slices.Equal(got, tt.want) {
			t.Errorf("%s: offsets %v, want %v", tt.target, got, tt.want)
		}
		for _, l := range lines {
			if l["offset"] == 2.0 && (l["data"] != "Yg==" || l["epoch"] != 3.0) {
				t.Errorf("entry 2 = %v, want data base64(\"b\")=Yg== epoch 3", l)
			}
		}
	}

	// Ending at a control entry: the response must still end.
	f2 := newFakeNode()
	f2.commit("x")
	f2.commitControl()
	rec := do(t, newTestServer(f2).handler(), "GET", "/entries?follow=false", "")
	if got := offsets(readLines(t, rec.Body.String())); !slices.Equal(got, []uint64{0}) {
		t.Errorf("trailing control entry: offsets %v, want [0]", got)
	}
}

func TestEntriesErrors(t *testing.T) {
	f := newFakeNode()
	f.status.LogStart, f.status.LEO, f.status.HighWatermark = 10, 10, 10
	rec := do(t, newTestServer(f).handler(), "GET", "/entries?from=3&follow=false", "")
	if rec.Code != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("below log start: status %d, want 416", rec.Code)
	}
	decodeJSON(t, rec)

	// An error after some lines becomes a last {"error"} line.
	f = newFakeNode()
	f.commit("a")
	f.readErr = fmt.Errorf("%w: offset 1", replog.ErrCorrupt)
	f.status.HighWatermark = 2 // offset 1 "exists" but the read fails there
	rec = do(t, newTestServer(f).handler(), "GET", "/entries?follow=false", "")
	lines := readLines(t, rec.Body.String())
	if len(lines) != 2 || lines[0]["offset"] != 0.0 || !strings.Contains(fmt.Sprint(lines[1]["error"]), "corrupt") {
		t.Errorf("lines %v, want entry 0 then an error line", lines)
	}

	// An error before any line is a JSON error with a status code.
	f = newFakeNode()
	f.status.HighWatermark = 1
	f.readErr = replog.ErrClosed
	rec = do(t, newTestServer(f).handler(), "GET", "/entries?follow=false", "")
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("closed log: status %d, want 503", rec.Code)
	}
}

func TestEntriesFollow(t *testing.T) {
	f := newFakeNode()
	srv := httptest.NewServer(newTestServer(f).handler())
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/entries", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The headers came before any entry exists.
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		t.Errorf("status %d, Content-Type %q", resp.StatusCode, ct)
	}
	f.commit("a")
	br := bufio.NewReader(resp.Body)
	readEntry := func() entryJSON {
		t.Helper()
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading a streamed line: %v", err)
		}
		var e entryJSON
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	if e := readEntry(); e.Offset != 0 || string(e.Data) != "a" {
		t.Fatalf("first entry %+v", e)
	}
	// Committed later: must arrive on the open stream (flushed at once).
	f.commitControl()
	f.commit("b")
	if e := readEntry(); e.Offset != 2 || string(e.Data) != "b" {
		t.Fatalf("streamed entry %+v, want offset 2 data b", e)
	}
	// The client going away ends the handler (goleak checks in TestMain).
	cancel()
	_, _ = io.Copy(io.Discard, resp.Body)
}

func TestHistory(t *testing.T) {
	h := newHistory(3)
	t0 := time.Unix(100, 0)
	st := replog.Status{NodeID: "n1", Role: "leader", LEO: 1}
	if !h.record(t0, st) {
		t.Fatal("first status not recorded")
	}
	st.RPCAddr = "127.0.0.1:9" // not explained: no event
	if h.record(t0, st) {
		t.Error("an address-only change was recorded")
	}
	st.DurableLEO = 1 // the leader's fsync: explained
	if !h.record(t0, st) {
		t.Error("a DurableLEO change was not recorded")
	}
	for i := uint64(2); i <= 5; i++ {
		st.LEO = i
		h.record(t0.Add(time.Duration(i)*time.Millisecond), st)
	}
	st.RemoteLEO = map[string]uint64{"n2": 5}
	if !h.record(t0, st) {
		t.Error("a remote LEO change was not recorded")
	}
	all := h.since(0)
	if all.Seq != 7 || len(all.Events) != 3 {
		t.Fatalf("seq %d, %d events; want seq 7 and the last 3 kept", all.Seq, len(all.Events))
	}
	if all.Events[0].Seq != 5 || all.Events[0].Status.LEO != 4 || all.Events[0].TimeUS != t0.Add(4*time.Millisecond).UnixMicro() {
		t.Errorf("oldest kept event %+v", all.Events[0])
	}
	if got := h.since(6); len(got.Events) != 1 || got.Events[0].Seq != 7 {
		t.Errorf("since(6) = %+v, want just event 7", got.Events)
	}
	if got := h.since(7); got.Events == nil || len(got.Events) != 0 {
		t.Errorf("since(6) = %#v, want an empty (non-nil: JSON []) list", got.Events)
	}
}

// lastLEO is the LEO of h's latest recorded status (0 if none).
func lastLEO(h *history) uint64 {
	got := h.since(0)
	if n := len(got.Events); n > 0 {
		return got.Events[n-1].Status.LEO
	}
	return 0
}

func TestSampler(t *testing.T) {
	f := newFakeNode()
	h := newHistory(100)
	s := startSampler(f, h, time.Millisecond, 0) // idle 0: always
	defer s.stop()
	f.commit("a")
	testwait.WaitFor(t, "the sampler records LEO 1", 30*time.Second, func() bool { return lastLEO(h) == 1 })
	s.stop()
	s.stop() // idempotent
}

// TestSamplerSamplesOnlyWhileWatched: sampling stops once nobody has read
// the history for the idle time, and a read resumes it.
func TestSamplerSamplesOnlyWhileWatched(t *testing.T) {
	f := newFakeNode()
	h := newHistory(100)
	s := startSampler(f, h, time.Millisecond, 100*time.Millisecond)
	defer s.stop()
	// Watched from the start, for the idle time: a commit shows.
	f.commit("a")
	testwait.WaitFor(t, "the sampler records LEO 1", 30*time.Second, func() bool { return lastLEO(h) == 1 })

	// Nobody reads the history: it stops sampling (no sample in 300 ms,
	// where a running sampler takes hundreds).
	testwait.WaitFor(t, "the sampler to sleep", 30*time.Second, func() bool {
		n := s.samples.Load()
		time.Sleep(300 * time.Millisecond)
		return s.samples.Load() == n
	})
	f.commit("b")
	time.Sleep(300 * time.Millisecond)
	if got := lastLEO(h); got != 1 {
		t.Fatalf("an unwatched sampler recorded LEO %d", got)
	}

	// The dashboard reads /history again: sampling resumes at once.
	srv := httptest.NewServer((&server{node: f, hist: h, sampler: s, logger: hclog.NewNullLogger()}).handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testwait.WaitFor(t, "the woken sampler records LEO 2", 30*time.Second, func() bool { return lastLEO(h) == 2 })
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-id", "n1", "-dir", "/d", "-voters", "n1,n2,n3", "-peers", "n2=127.0.0.1:9002, n3=127.0.0.1:9003",
		"-http-peers", "n2=http://127.0.0.1:8082", "-join", "a:1,b:2", "-fetch-timeout", "3s", "-nosync"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.id != "n1" || c.dir != "/d" || !c.nosync || c.fetchTimeout != 3*time.Second ||
		!slices.Equal(c.voters, []string{"n1", "n2", "n3"}) || !slices.Equal(c.join, []string{"a:1", "b:2"}) ||
		c.peers["n3"] != "127.0.0.1:9003" || c.httpPeers["n2"] != "http://127.0.0.1:8082" || c.cluster != "replog-example" {
		t.Errorf("parsed %+v", c)
	}
	for _, bad := range [][]string{{"-id", "n1"}, {"-peers", "n2"}, {"-peers", "=x"}, {"extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
	if c, err := parseFlags(nil, io.Discard); err != nil || c.id != "" {
		t.Errorf("no flags (demo mode): %+v, %v", c, err)
	}

	// Retention: sizes with binary suffixes, an age, a delete timeout.
	c, err = parseFlags([]string{"-id", "n1", "-dir", "/d", "-retention-bytes", "256MiB", "-retention-age", "168h",
		"-segment-bytes", "16384", "-delete-timeout", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.retentionBytes != 256<<20 || c.retentionAge != 168*time.Hour || c.segmentBytes != 16384 || c.deleteTimeout != 2*time.Second {
		t.Errorf("retention flags parsed as bytes %d, age %v, segment %d, delete timeout %v", c.retentionBytes, c.retentionAge, c.segmentBytes, c.deleteTimeout)
	}
	if c, _ := parseFlags([]string{"-id", "n1", "-dir", "/d"}, io.Discard); c.retentionBytes != 0 || c.retentionAge != 0 || c.segmentBytes != 0 {
		t.Errorf("retention is on by default: %+v", c)
	}
	for _, bad := range [][]string{{"-retention-bytes", "-1"}, {"-segment-bytes", "16XB"}, {"-retention-bytes", "9999999999G"}, {"-retention-age", "forever"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}

// A web page of another origin cannot append through a node (403, nothing
// appended) and cannot read its answers (no CORS header); the node's own
// dashboard, a peer's dashboard (-http-peers) and non-browser clients can.
func TestAppendRefusesCrossOriginRequests(t *testing.T) {
	f := newFakeNode()
	h := newTestServer(f).handler()
	send := func(method, path string, headers map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://n1.test"+path, strings.NewReader("x"))
		req.Header.Set("Content-Type", "text/plain")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	evil := []map[string]string{
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://n1.test:8080", "Sec-Fetch-Site": "same-site"}, // another port: another origin
		{"Origin": "https://evil.example"},                               // a browser without Sec-Fetch-Site
		{"Origin": "null", "Sec-Fetch-Site": "cross-site"},               // a sandboxed page
	}
	for _, hdr := range evil {
		rec := send("POST", "/append", hdr)
		if rec.Code != http.StatusForbidden {
			t.Errorf("append from %v: status %d, want 403", hdr, rec.Code)
		} else if m := decodeJSON(t, rec); m["error"] == nil {
			t.Errorf("append from %v: 403 without a JSON error: %s", hdr, rec.Body)
		}
		if got := send("GET", "/status", hdr).Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("status read from %v: Access-Control-Allow-Origin %q lets that page read it", hdr, got)
		}
	}
	if len(f.appendGot) != 0 {
		t.Fatalf("refused requests appended %q", f.appendGot)
	}
	good := []map[string]string{
		{"Origin": "http://n1.test", "Sec-Fetch-Site": "same-origin"}, // this node's dashboard
		{"Origin": "http://n1.test"},                                  // same, older browser
		{"Origin": "http://n2.test", "Sec-Fetch-Site": "same-site"},   // n2's dashboard appending via n1
		{}, // curl
	}
	for _, hdr := range good {
		if rec := send("POST", "/append", hdr); rec.Code != http.StatusOK {
			t.Errorf("append from %v: status %d, want 200 (%s)", hdr, rec.Code, rec.Body)
		}
	}
	if len(f.appendGot) != len(good) {
		t.Fatalf("%d of %d accepted appends reached the log", len(f.appendGot), len(good))
	}
	if got := send("GET", "/status", good[2]).Header().Get("Access-Control-Allow-Origin"); got != "http://n2.test" {
		t.Errorf("status read from n2's dashboard: Access-Control-Allow-Origin %q, want http://n2.test", got)
	}
}

// The servers have every limit set (the values, not their timing: a slow
// client is net/http's business once they are set).
func TestHTTPServerLimits(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), hclog.NewNullLogger())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 ||
		srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes >= http.DefaultMaxHeaderBytes {
		t.Fatalf("limits not set: ReadHeaderTimeout %v ReadTimeout %v WriteTimeout %v IdleTimeout %v MaxHeaderBytes %d",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	if srv.ReadHeaderTimeout > srv.ReadTimeout {
		t.Errorf("ReadHeaderTimeout %v exceeds ReadTimeout %v", srv.ReadHeaderTimeout, srv.ReadTimeout)
	}
}

// A follow=true stream outlives the server's ReadTimeout and WriteTimeout:
// an entry committed after both have passed still reaches the client.
// (Without extend, the expired write deadline fails the write: checked by
// removing it.)
func TestFollowStreamOutlivesServerTimeouts(t *testing.T) {
	f := newFakeNode()
	f.commit("before")
	ts := httptest.NewUnstartedServer(newTestServer(f).handler())
	ts.Config.ReadTimeout = 100 * time.Millisecond
	ts.Config.WriteTimeout = 100 * time.Millisecond
	ts.Start()
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/entries?follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"offset":0`) {
		t.Fatalf("first line %q (%v)", sc.Text(), sc.Err())
	}
	time.Sleep(400 * time.Millisecond) // both timeouts pass
	f.commit("after")
	if !sc.Scan() || !strings.Contains(sc.Text(), `"offset":1`) {
		t.Fatalf("line after the timeouts: %q (%v): the stream was cut", sc.Text(), sc.Err())
	}
}

func TestParseAuthFlags(t *testing.T) {
	c, err := parseFlags([]string{"-id", "n1", "-dir", "/d", "-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-ca", "ca.pem", "-secret-file", "s"}, io.Discard)
	if err != nil || c.tlsCert != "c.pem" || c.tlsKey != "k.pem" || c.tlsCA != "ca.pem" || c.secretFile != "s" || c.insecure {
		t.Fatalf("parsed %+v, %v", c, err)
	}
	if c, err := parseFlags([]string{"-id", "n1", "-dir", "/d", "-insecure"}, io.Discard); err != nil || !c.insecure {
		t.Fatalf("-insecure: %+v, %v", c, err)
	}
	for _, bad := range [][]string{
		{"-id", "n1", "-dir", "/d", "-tls-cert", "c.pem"},                                           // without key and CA
		{"-id", "n1", "-dir", "/d", "-tls-cert", "c.pem", "-tls-key", "k.pem"},                      // without CA
		{"-id", "n1", "-dir", "/d", "-insecure", "-secret-file", "s"},                               // contradiction
		{"-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-ca", "ca.pem"},                            // demo: one cert for three nodes
		{"-id", "n1", "-dir", "/d", "-insecure", "-tls-cert", "c", "-tls-key", "k", "-tls-ca", "a"}, // contradiction
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}

// The secret file: the demo writes one only its owner may read; a file
// others may read, or a short secret, is refused; a trailing newline is
// not part of the secret.
func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	path, err := writeSecretFile(dir, "secret")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, want 0600", fi.Mode().Perm())
	}
	secret, err := readSecretFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) != 64 || bytes.ContainsAny(secret, "\r\n") {
		t.Fatalf("secret %q: want 64 hex characters without the newline", secret)
	}
	if _, err := writeSecretFile(dir, "secret"); err == nil {
		t.Fatal("writeSecretFile overwrote an existing file")
	}
	other, _ := writeSecretFile(t.TempDir(), "secret")
	if o, _ := readSecretFile(other); bytes.Equal(o, secret) {
		t.Fatal("two demo runs got the same secret")
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSecretFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable secret file: %v, want a refusal saying chmod 600", err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("fifteen bytes!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSecretFile(short); err == nil {
		t.Fatal("a 15-byte secret was accepted")
	}
	if err := os.WriteFile(short, []byte("sixteen bytes!!!\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := readSecretFile(short); err != nil || string(s) != "sixteen bytes!!!" {
		t.Fatalf("16-byte secret with CRLF: %q, %v", s, err)
	}
}

// An append that takes longer than the server's WriteTimeout (as a long
// -append-timeout allows) still gets its answer to the client.
func TestSlowAppendAnswerOutlivesWriteTimeout(t *testing.T) {
	f := newFakeNode()
	f.appendOff, f.appendDelay = 7, 300*time.Millisecond
	ts := httptest.NewUnstartedServer(newTestServer(f).handler())
	ts.Config.WriteTimeout = 100 * time.Millisecond
	ts.Start()
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/append", "text/plain", strings.NewReader("slow"))
	if err != nil {
		t.Fatalf("the answer of a slow append was lost: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"offset":7`) {
		t.Fatalf("slow append: %d %s, want 200 offset 7", resp.StatusCode, body)
	}
}

// /delete-before calls DeleteBefore with the offset and a bounded context
// and answers the node's log start; the log start it reaches is at most
// the HW.
func TestDeleteBefore(t *testing.T) {
	f := newFakeNode()
	for i := range 10 {
		f.commit(fmt.Sprint("e", i)) // offsets 0..9, HW 10
	}
	s := newTestServer(f)
	h := s.handler()

	rec := do(t, h, "POST", "/delete-before?offset=4", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("delete before 4: status %d (%s)", rec.Code, rec.Body)
	}
	if m := decodeJSON(t, rec); m["log_start"] != 4.0 || m["requested"] != 4.0 || m["hw"] != 10.0 {
		t.Errorf("delete before 4 answered %s, want log_start 4, requested 4, hw 10", rec.Body)
	}
	if len(f.deleteCtxs) != 1 {
		t.Fatalf("DeleteBefore called %d times, want 1", len(f.deleteCtxs))
	}
	if d, ok := f.deleteCtxs[0].Deadline(); !ok || time.Until(d) > s.deleteTimeout {
		t.Errorf("DeleteBefore's context has deadline %v (set: %v), want one within -delete-timeout %v", d, ok, s.deleteTimeout)
	}
	if m := decodeJSON(t, do(t, h, "GET", "/status", "")); m["log_start"] != 4.0 {
		t.Errorf("status log_start %v after the deletion, want 4", m["log_start"])
	}

	// Above the HW: only the committed entries go.
	rec = do(t, h, "POST", "/delete-before?offset=50", "")
	if m := decodeJSON(t, rec); rec.Code != http.StatusOK || m["log_start"] != 10.0 || m["requested"] != 50.0 {
		t.Errorf("delete before 50 with HW 10: %d %s, want 200 log_start 10 requested 50", rec.Code, rec.Body)
	}

	// Bad requests never reach the node.
	for _, target := range []string{"/delete-before", "/delete-before?offset=", "/delete-before?offset=x", "/delete-before?offset=-1", "/delete-before?offset=1.5"} {
		rec := do(t, h, "POST", target, "")
		if m := decodeJSON(t, rec); rec.Code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["error"]), "offset") {
			t.Errorf("POST %s: %d %s, want 400 naming the offset", target, rec.Code, rec.Body)
		}
	}
	if !slices.Equal(f.deleteGot, []uint64{4, 50}) {
		t.Errorf("DeleteBefore got %v, want [4 50]", f.deleteGot)
	}
}

// DeleteBefore's errors map to clear status codes, and every error names
// where the node's log start stands.
func TestDeleteBeforeErrors(t *testing.T) {
	deadline := context.DeadlineExceeded
	tests := []struct {
		name    string
		err     error
		code    int
		leader  string
		wantMsg string
	}{
		{"no leader until the deadline", fmt.Errorf("%w (%w)", &replog.NotLeaderError{}, deadline), 503, "", "no leader"},
		{"not leader, leader known", &replog.NotLeaderError{LeaderID: "n2"}, 503, "n2", "not the leader"},
		{"closed", replog.ErrClosed, 503, "", "closed"},
		{"timeout", deadline, 504, "", "will follow"},
		{"disk failure", fmt.Errorf("%w: bolt: disk on fire", replog.ErrStorageFailed), 500, "", "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			f.status.LogStart, f.status.HighWatermark = 3, 9
			f.deleteErr = tt.err
			rec := do(t, newTestServer(f).handler(), "POST", "/delete-before?offset=7", "")
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.code, rec.Body)
			}
			m := decodeJSON(t, rec)
			if !strings.Contains(fmt.Sprint(m["error"]), tt.wantMsg) {
				t.Errorf("error %q, want it to say %q", m["error"], tt.wantMsg)
			}
			if m["log_start"] != 3.0 {
				t.Errorf("log_start %v, want 3 (where the node's log start stands)", m["log_start"])
			}
			if tt.leader != "" && (m["leader"] != tt.leader || m["leader_url"] != "http://"+tt.leader+".test") {
				t.Errorf("leader %v at %v, want %s", m["leader"], m["leader_url"], tt.leader)
			}
		})
	}
}

// A read from below the log start answers 416 naming the log start (the
// offset to resume from), also when the entries go while a stream runs;
// without from, a read starts at the log start.
func TestEntriesBelowLogStart(t *testing.T) {
	f := newFakeNode()
	for i := range 10 {
		f.commit(fmt.Sprint("e", i))
	}
	if _, err := f.DeleteBefore(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newTestServer(f).handler())
	defer srv.Close()
	h := srv.Config.Handler

	for _, target := range []string{"/entries?from=2&follow=false", "/entries?from=0", "/entries?from=3&follow=true"} {
		rec := do(t, h, "GET", target, "")
		m := decodeJSON(t, rec)
		if rec.Code != http.StatusRequestedRangeNotSatisfiable || m["log_start"] != 4.0 ||
			!strings.Contains(fmt.Sprint(m["error"]), "below the log start 4") {
			t.Errorf("GET %s: %d %s, want 416 naming log start 4", target, rec.Code, rec.Body)
		}
	}
	rec := do(t, h, "GET", "/entries?follow=false", "")
	if got := offsets(readLines(t, rec.Body.String())); rec.Code != 200 || !slices.Equal(got, []uint64{4, 5, 6, 7, 8, 9}) {
		t.Errorf("GET /entries without from: %d offsets %v, want 4..9 (from the log start)", rec.Code, got)
	}

	// A stream waiting at offset 10 while entries 10..14 come and the log
	// start passes them: its last line is the error, naming log start 12.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/entries?from=8", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for _, want := range []uint64{8, 9} {
		line, err := br.ReadBytes('\n')
		var e entryJSON
		if err != nil || json.Unmarshal(line, &e) != nil || e.Offset != want {
			t.Fatalf("streamed line %q (%v), want offset %d", line, err, want)
		}
	}
	f.mu.Lock()
	for i := range 5 {
		f.data[f.status.LEO] = []byte(fmt.Sprint("late", i))
		f.status.LEO++
	}
	f.status.HighWatermark, f.status.DurableLEO, f.status.LogStart = f.status.LEO, f.status.LEO, 12
	close(f.changed)
	f.changed = nil
	f.mu.Unlock()
	line, err := br.ReadBytes('\n')
	var last apiError
	if err != nil || json.Unmarshal(line, &last) != nil || last.LogStart == nil || *last.LogStart != 12 || !strings.Contains(last.Error, "offset 10 is below the log start 12") {
		t.Fatalf("last line %q (%v), want an error naming offset 10 and log start 12", line, err)
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("the stream went on after its error: %q", rest)
	}
}

// On a real Log: /delete-before moves the log start (bounded by the HW),
// /status reports it, and reads below it get 416 with replog's
// OutOfRangeError, not a 500.
func TestDeleteBeforeWithARealLog(t *testing.T) {
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &server{node: l, self: "n1", appendTimeout: 10 * time.Second, deleteTimeout: 10 * time.Second,
		maxRecord: maxRecordSize, logger: hclog.NewNullLogger()}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("POST %s: answer is not JSON: %v", path, err)
		}
		return resp.StatusCode, m
	}
	var offs []uint64
	for i := range 6 {
		code, m := post("/append", fmt.Sprint("record ", i))
		if code != http.StatusOK {
			t.Fatalf("append: %d %v", code, m)
		}
		offs = append(offs, uint64(m["offset"].(float64)))
	}
	cut := offs[3]
	if code, m := post(fmt.Sprintf("/delete-before?offset=%d", cut), ""); code != http.StatusOK || m["log_start"] != float64(cut) {
		t.Fatalf("delete before %d: %d %v, want 200 log_start %d", cut, code, m, cut)
	}
	if st := l.Status(); st.LogStart != cut {
		t.Errorf("the Log's log start is %d, want %d", st.LogStart, cut)
	}
	get := func(target string) *http.Response {
		t.Helper()
		resp, err := http.Get(srv.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := get(fmt.Sprintf("/entries?from=%d&follow=false", offs[1]))
	var e apiError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusRequestedRangeNotSatisfiable ||
		e.LogStart == nil || *e.LogStart != cut || !strings.Contains(e.Error, fmt.Sprintf("below the log start %d", cut)) {
		t.Errorf("read below the log start: %d %+v (%v), want 416 naming log start %d", resp.StatusCode, e, err, cut)
	}
	resp = get("/entries?follow=false")
	body, _ := io.ReadAll(resp.Body)
	if got := offsets(readLines(t, string(body))); !slices.Equal(got, offs[3:]) {
		t.Errorf("entries from the log start: %v, want %v", got, offs[3:])
	}
	// Above the HW: the committed entries go, never the last of them
	// (R51: the log start stays below the HW; the HW in the answer, since
	// the deletion may first append copies of live producer keys, R66).
	hw := l.Status().HighWatermark
	code, m := post(fmt.Sprintf("/delete-before?offset=%d", hw+100), "")
	ls, _ := m["log_start"].(float64)
	if ahw, _ := m["hw"].(float64); code != http.StatusOK || ls < float64(cut) || ls >= ahw || ahw < float64(hw) {
		t.Errorf("delete before HW+100 (HW %d): %d %v, want 200 with a log start in [%d, the answer's HW)", hw, code, m, cut)
	}
}

// /voters/add and /voters/remove call AddVoter and RemoveVoter with the
// node named, bounded by -voter-timeout, and map their errors: a timeout
// (whatever it waited for) is 504, a node that is not a voter 404, the
// last voter 409.
func TestVoterChange(t *testing.T) {
	deadline := context.DeadlineExceeded
	tests := []struct {
		name, target string
		err          error
		code         int
		wantMsg      string
	}{
		{"added", "/voters/add?node=n4", nil, 200, ""},
		{"removed", "/voters/remove?node=n3", nil, 200, ""},
		{"not a voter", "/voters/remove?node=n9", fmt.Errorf("replog: remove voter n9: %w", replog.ErrUnknownNode), 404, "unknown node"},
		{"last voter", "/voters/remove?node=n1", fmt.Errorf("replog: remove voter n1: %w", replog.ErrLastVoter), 409, "last voter"},
		{"node not fetching", "/voters/add?node=n9", fmt.Errorf("replog: add voter n9: %w: it does not fetch from the leader (%w)", replog.ErrUnknownNode, deadline), 504, "does not fetch"},
		{"change in progress", "/voters/add?node=n4", fmt.Errorf("%w (%w)", replog.ErrVoterChangeInProgress, deadline), 504, "in progress"},
		{"no leader", "/voters/add?node=n4", fmt.Errorf("%w (%w)", replog.ErrNoLeader, deadline), 504, "no leader"},
		{"closed", "/voters/add?node=n4", replog.ErrClosed, 503, "closed"},
		{"disk failure", "/voters/add?node=n4", fmt.Errorf("%w: disk on fire", replog.ErrStorageFailed), 500, "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			f.voterErr = tt.err
			rec := do(t, newTestServer(f).handler(), "POST", tt.target, "")
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d (body %s)", rec.Code, tt.code, rec.Body)
			}
			op, node, _ := strings.Cut(strings.TrimPrefix(tt.target, "/voters/"), "?node=")
			if len(f.voterGot) != 1 || f.voterGot[0] != op+" "+node {
				t.Fatalf("calls %v, want one %s of %s", f.voterGot, op, node)
			}
			if dl, ok := f.voterCtxs[0].Deadline(); !ok || time.Until(dl) > 5*time.Second {
				t.Errorf("the change's context has no -voter-timeout deadline (%v, %v)", dl, ok)
			}
			if tt.err != nil {
				if msg, _ := decodeJSON(t, rec)["error"].(string); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("error %q does not mention %q", msg, tt.wantMsg)
				}
				return
			}
			var got votersJSON
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			has := slices.ContainsFunc(got.Voters, func(v replog.VoterStatus) bool { return v.ID == node })
			if got.Node != node || has != (op == "add") {
				t.Errorf("answer %+v after %s %s", got, op, node)
			}
		})
	}
}

// The voter endpoints on a real single-node Log: removing the last voter
// is refused (409), removing a node that is not a voter is 404, adding
// the node itself (already a voter) succeeds with its directory.
func TestVoterChangeWithARealLog(t *testing.T) {
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &server{node: l, self: "n1", voterTimeout: 10 * time.Second, maxRecord: maxRecordSize, logger: hclog.NewNullLogger()}
	h := s.handler()
	if rec := do(t, h, "POST", "/voters/remove?node=n1", ""); rec.Code != http.StatusConflict {
		t.Errorf("removing the last voter: %d %s, want 409", rec.Code, rec.Body)
	}
	if rec := do(t, h, "POST", "/voters/remove?node=n2", ""); rec.Code != http.StatusNotFound {
		t.Errorf("removing a node that is not a voter: %d %s, want 404", rec.Code, rec.Body)
	}
	rec := do(t, h, "POST", "/voters/add?node=n1", "")
	var got votersJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || len(got.Voters) != 1 ||
		got.Voters[0].ID != "n1" || got.Voters[0].DirectoryID != l.Status().DirectoryID || got.Voters[0].DirectoryID == "" {
		t.Errorf("adding n1 (a voter already): %d %s (%v)", rec.Code, rec.Body, err)
	}
}
