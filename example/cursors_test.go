package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/testwait"
)

// The cursor endpoints over the fake: PUT commits, GET reads it back, a
// cursor never committed is 404, a bad body 400, a commit's unknown
// outcome 504 like an append's, a read's error carries no outcome.
func TestCursorEndpoints(t *testing.T) {
	f := newFakeNode()
	h := newTestServer(f).handler()
	if rec := do(t, h, "GET", "/cursors/orders", ""); rec.Code != 404 || decodeJSON(t, rec)["code"] != codeNoCursor {
		t.Errorf("a cursor never committed: %d %s, want 404 %s", rec.Code, rec.Body, codeNoCursor)
	}
	if rec := do(t, h, "PUT", "/cursors/orders", `{"next":42}`); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"next":42`) {
		t.Errorf("PUT: %d %s", rec.Code, rec.Body)
	}
	rec := do(t, h, "GET", "/cursors/orders", "")
	var got cursorJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 || got.Name != "orders" || got.Next == nil || *got.Next != 42 {
		t.Errorf("GET after PUT: %d %s", rec.Code, rec.Body)
	}
	for _, body := range []string{``, `{}`, `{"next":-1}`, `next=3`} {
		if rec := do(t, h, "PUT", "/cursors/orders", body); rec.Code != 400 || decodeJSON(t, rec)["code"] != codeBadRequest {
			t.Errorf("PUT %q: %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
	if rec := do(t, h, "GET", "/cursors/"+strings.Repeat("c", replog.MaxIDLength+1), ""); rec.Code != 400 {
		t.Errorf("a name above MaxIDLength: %d %s, want 400", rec.Code, rec.Body)
	}
	if rec := do(t, h, "POST", "/cursors/orders", `{"next":1}`); rec.Code != 405 || rec.Header().Get("Allow") != "GET, PUT" {
		t.Errorf("POST: %d %v, want 405 with Allow", rec.Code, rec.Header())
	}
	f.cursorErr = fmt.Errorf("%w (%w)", replog.ErrUnknownOutcome, context.DeadlineExceeded)
	if rec := do(t, h, "PUT", "/cursors/orders", `{"next":43}`); rec.Code != 504 || decodeJSON(t, rec)["outcome"] != outcomeUnknown {
		t.Errorf("a commit's unknown outcome: %d %s, want 504 unknown", rec.Code, rec.Body)
	}
	f.cursorErr = fmt.Errorf("replog: barrier: %w (%w)", &replog.NotLeaderError{}, context.DeadlineExceeded)
	if rec := do(t, h, "GET", "/cursors/orders", ""); rec.Code != 503 || strings.Contains(rec.Body.String(), "outcome") {
		t.Errorf("a read without a leader: %d %s, want 503 without an outcome", rec.Code, rec.Body)
	}
	if dl, ok := f.cursorCtxs[0].Deadline(); !ok || time.Until(dl) > 5*time.Second {
		t.Errorf("the cursor call's context has no -append-timeout deadline (%v, %v)", dl, ok)
	}
	// A page of another origin may not move a cursor.
	req := httptest.NewRequest("PUT", "/cursors/orders", strings.NewReader(`{"next":1}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a cross-origin PUT: %d, want 403", rec.Code)
	}
}

// With a real Log: a cursor never committed is 404; PUT commits it, GET
// reads it back.
func TestCursorsWithARealLog(t *testing.T) {
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &server{node: l, self: "n1", appendTimeout: 10 * time.Second, maxRecord: maxRecordSize, logger: hclog.NewNullLogger()}
	h := s.handler()
	off, err := l.Append(context.Background(), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if rec := do(t, h, "GET", "/cursors/c1", ""); rec.Code != 404 {
		t.Errorf("GET a cursor never committed: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, h, "PUT", "/cursors/c1", fmt.Sprintf(`{"next":%d}`, off)); rec.Code != 200 {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	rec := do(t, h, "GET", "/cursors/c1", "")
	var c cursorJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || rec.Code != 200 || c.Next == nil || *c.Next != off {
		t.Errorf("GET after PUT %d: %d %s", off, rec.Code, rec.Body)
	}
}

// The pipeline with a real Log: every input's output once, in input
// order; a pipeline that crashed after appending an output and before
// committing the cursor redoes that input on its restart, and the log
// recognises the output by its ID.
func TestPipelineExactlyOnceWithARealLog(t *testing.T) {
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	appendAll := func(recs ...string) (last uint64) {
		for _, r := range recs {
			off, err := l.Append(ctx, []byte(r))
			if err != nil {
				t.Fatal(err)
			}
			last = off
		}
		return last
	}
	p := &pipeline{log: l, from: []byte("in:"), to: []byte("out:"), cursor: "pipe", logger: hclog.NewNullLogger(), retry: 10 * time.Millisecond}
	runUntil := func(next uint64) {
		t.Helper()
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.run(pctx)
		}()
		testwait.WaitFor(t, fmt.Sprintf("the cursor at %d", next), 10*time.Second, func() bool {
			c, err := l.Cursor(ctx, "pipe")
			return err == nil && c >= next
		})
		cancel()
		<-done
	}
	last := appendAll("in:a", "other", "in:b")
	runUntil(last + 1)

	// The crash: the output of in:c appended under its ID, the cursor not
	// moved past in:c.
	inC := appendAll("in:c")
	if _, err := l.Append(ctx, []byte("out:c"), replog.WithID(p.id(inC))); err != nil {
		t.Fatal(err)
	}
	last = appendAll("in:d")
	runUntil(last + 1)

	var outs []string
	for e, err := range l.ReadRange(ctx, 0, l.Status().HighWatermark) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(e.Data), "out:") {
			outs = append(outs, string(e.Data))
		}
	}
	if !slices.Equal(outs, []string{"out:a", "out:b", "out:c", "out:d"}) {
		t.Errorf("outputs %q, want out:a..out:d once each", outs)
	}
}

func TestParsePipeline(t *testing.T) {
	if from, to, err := parsePipeline("in:=out:"); err != nil || from != "in:" || to != "out:" {
		t.Errorf("in:=out: -> %q %q %v", from, to, err)
	}
	for _, bad := range []string{"", "in:", "=out:", "in:=in:x"} {
		if _, _, err := parsePipeline(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
