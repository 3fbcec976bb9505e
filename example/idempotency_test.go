package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
)

// doWith is do with request headers.
func doWith(t *testing.T, h http.Handler, method, target, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// An unknown outcome is 503 or 504 with a code, never 500 (kept for a
// failed disk and errors the API does not know); every error names its
// code; a duplicate is 200 with the original offset, "duplicate": true and
// Idempotent-Replayed.
func TestAppendErrorCodes(t *testing.T) {
	deadline := context.DeadlineExceeded
	tests := []struct {
		name    string
		err     error
		status  int
		code    string
		outcome string
	}{
		{"ctx expired in the Log", fmt.Errorf("%w (%w)", replog.ErrUnknownOutcome, deadline), 504, codeTimeout, outcomeUnknown},
		{"ctx cancelled in the Log", fmt.Errorf("%w (%w)", replog.ErrUnknownOutcome, context.Canceled), 504, codeTimeout, outcomeUnknown},
		{"closing mid-flight", fmt.Errorf("%w: %w", replog.ErrClosed, replog.ErrUnknownOutcome), 503, codeClosing, outcomeUnknown},
		{"other unknown outcome", fmt.Errorf("epoch 4: %w", replog.ErrUnknownOutcome), 503, codeUnknownOutcome, outcomeUnknown},
		{"bare timeout", deadline, 504, codeTimeout, outcomeUnknown},
		{"not leader", &replog.NotLeaderError{LeaderID: "n2"}, 503, codeNotLeader, outcomeFailed},
		{"no leader", &replog.NotLeaderError{}, 503, codeNoLeader, outcomeFailed},
		{"closed", replog.ErrClosed, 503, codeClosed, outcomeFailed},
		{"too large", replog.ErrTooLarge, 413, codeTooLarge, outcomeFailed},
		{"disk failed", fmt.Errorf("%w: %w", replog.ErrStorageFailed, replog.ErrUnknownOutcome), 500, codeStorageFailed, outcomeUnknown},
		{"unforeseen", errors.New("bolt: disk on fire"), 500, codeInternal, outcomeUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			f.appendErr = tt.err
			rec := do(t, newTestServer(f).handler(), "POST", "/append", "hello")
			m := decodeJSON(t, rec)
			if rec.Code != tt.status || m["code"] != tt.code || m["outcome"] != tt.outcome {
				t.Errorf("%d %s, want %d with code %q, outcome %q", rec.Code, rec.Body, tt.status, tt.code, tt.outcome)
			}
		})
	}

	f := newFakeNode()
	f.appendOff, f.appendErr = 4, fmt.Errorf("replog: append: %w", replog.ErrDuplicate)
	rec := doWith(t, newTestServer(f).handler(), "POST", "/append", "hello", map[string]string{idempotencyHeader: "order-1"})
	if m := decodeJSON(t, rec); rec.Code != 200 || m["offset"] != 4.0 || m["duplicate"] != true || rec.Header().Get(replayedHeader) != "true" {
		t.Errorf("a duplicate: %d %s %v, want 200 with offset 4, duplicate and %s", rec.Code, rec.Body, rec.Header(), replayedHeader)
	}
	if len(f.appendOpts) != 1 || f.appendOpts[0] != 1 {
		t.Errorf("Append got %v options, want WithID", f.appendOpts)
	}
}

// The Idempotency-Key header: absent, no option; empty, too long or
// repeated, 400 before anything is appended.
func TestAppendIdempotencyKeyHeader(t *testing.T) {
	f := newFakeNode()
	h := newTestServer(f).handler()
	if rec := do(t, h, "POST", "/append", "x"); rec.Code != 200 || rec.Header().Get(replayedHeader) != "" {
		t.Errorf("no key: %d %v", rec.Code, rec.Header())
	}
	for name, hdr := range map[string][]string{
		"empty":    {""},
		"too long": {strings.Repeat("k", replog.MaxIDLength+1)},
		"repeated": {"a", "b"},
	} {
		req := httptest.NewRequest("POST", "/append", strings.NewReader("x"))
		req.Header[idempotencyHeader] = hdr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if m := decodeJSON(t, rec); rec.Code != 400 || m["code"] != codeBadKey || m["outcome"] != outcomeFailed {
			t.Errorf("%s key: %d %s, want 400 %s", name, rec.Code, rec.Body, codeBadKey)
		}
	}
	if rec := doWith(t, h, "POST", "/append", "x", map[string]string{idempotencyHeader: strings.Repeat("k", replog.MaxIDLength)}); rec.Code != 200 {
		t.Errorf("a key of MaxIDLength bytes: %d %s", rec.Code, rec.Body)
	}
	if !slices.Equal(f.appendOpts, []int{0, 1}) {
		t.Errorf("Append's option counts %v, want [0 1]: a bad key must append nothing", f.appendOpts)
	}
}

// With a real Log: the same Idempotency-Key appends once (the retry gets
// the first offset, marked duplicate), another key or none appends again.
func TestIdempotencyWithARealLog(t *testing.T) {
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &server{node: l, self: "n1", appendTimeout: 10 * time.Second, maxRecord: maxRecordSize, logger: hclog.NewNullLogger()}
	h := s.handler()
	post := func(body, key string) appendJSON {
		t.Helper()
		hdr := map[string]string{}
		if key != "" {
			hdr[idempotencyHeader] = key
		}
		rec := doWith(t, h, "POST", "/append", body, hdr)
		var a appendJSON
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || rec.Code != 200 {
			t.Fatalf("append %q key %q: %d %s", body, key, rec.Code, rec.Body)
		}
		if a.Duplicate != (rec.Header().Get(replayedHeader) == "true") {
			t.Errorf("duplicate %v but %s %q", a.Duplicate, replayedHeader, rec.Header().Get(replayedHeader))
		}
		return a
	}
	first := post("order 1", "order-1")
	again := post("order 1", "order-1")
	other := post("order 2", "order-2")
	plain := post("order 1", "")
	if first.Duplicate || !again.Duplicate || again.Offset != first.Offset {
		t.Errorf("the same key twice: %+v then %+v, want the second a duplicate at the first's offset", first, again)
	}
	if other.Duplicate || other.Offset <= first.Offset || plain.Duplicate || plain.Offset <= other.Offset {
		t.Errorf("another key %+v, no key %+v: want new appends", other, plain)
	}
	var data []string
	for e, err := range l.ReadRange(context.Background(), 0, l.Status().HighWatermark) {
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, string(e.Data))
	}
	if !slices.Equal(data, []string{"order 1", "order 2", "order 1"}) {
		t.Errorf("the log holds %q, want order 1, order 2, order 1", data)
	}
}
