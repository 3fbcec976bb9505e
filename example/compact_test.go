package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/protocol"
)

// TestCompactEndpoint: on a real compacted Log, POST /compact runs a pass
// now and answers its counters once it is done (entries removed below
// the lag, which the -compact flags set); GET /compact reads them
// without a pass; a log without compaction answers 409.
func TestCompactEndpoint(t *testing.T) {
	cfg, err := parseFlags([]string{"-id", "n1", "-dir", t.TempDir(), "-compact", "-compact-lag", "50ms",
		"-dedup-window", "50ms", "-compact-every", "1h", "-compact-rate", "64MiB"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseFlags([]string{"-compact-lag", "1s"}, &strings.Builder{}); err == nil {
		t.Fatal("-compact-lag without -compact accepted")
	}
	l, err := replog.Open(replog.Options{Dir: cfg.dir, NodeID: "n1", NoSync: true, SegmentBytes: 64 << 10,
		DedupWindow: cfg.dedupWindow, Compaction: compaction(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for l.Status().FeatureLevel < protocol.FeatureLevelKeys {
		if ctx.Err() != nil {
			t.Fatal("level 10 not reached")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 2500 {
		if _, err := l.Append(ctx, []byte(fmt.Sprintf("%04d|%s", i, strings.Repeat("v", 2000))), replog.WithKey(fmt.Sprint("k", i%10))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // past the lag
	s := &server{node: l, self: "n1", logger: hclog.NewNullLogger()}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	call := func(method string) (int, compactJSON) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/compact", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c compactJSON
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, c
	}
	if code, c := call(http.MethodGet); code != http.StatusOK || c.Passes != 0 {
		t.Fatalf("GET /compact before a pass: %d %+v", code, c)
	}
	code, c := call(http.MethodPost)
	if code != http.StatusOK || c.Passes != 1 || c.EntriesRemoved == 0 || c.Segments == 0 {
		t.Fatalf("POST /compact: %d %+v, want a pass that removed entries", code, c)
	}
	if code, g := call(http.MethodGet); code != http.StatusOK || g != c {
		t.Fatalf("GET /compact after the pass: %d %+v, want %+v", code, g, c)
	}

	plain, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	s2 := &server{node: plain, self: "n1", logger: hclog.NewNullLogger()}
	rec := httptest.NewRecorder()
	s2.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/compact", nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("POST /compact without compaction: %d %s, want 409", rec.Code, rec.Body)
	}
}
