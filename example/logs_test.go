package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogadmin"
)

// TestNamedLogs: -logs' createLogs creates log-1..log-N (and a second
// run keeps them), GET /logs lists them after the default log with each
// one's leader, LEO and HW, /logs/NAME/ serves every route of that log
// and not of the default one, the default log's routes are unchanged,
// and an unknown log answers 404 unknown_log.
func TestNamedLogs(t *testing.T) {
	n, err := replog.OpenNode(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createLogs(ctx, n, 2, hclog.NewNullLogger())
	createLogs(ctx, n, 2, hclog.NewNullLogger()) // taken: kept as they are
	s := &server{node: n.Default(), logs: nodeHost{n}, self: "n1", appendTimeout: 10 * time.Second, maxRecord: maxRecordSize, logger: hclog.NewNullLogger()}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()

	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("POST", "/logs/log-1/append", "one"); code != 200 {
		t.Fatalf("POST /logs/log-1/append: %d %s", code, body)
	}
	if code, body := do("POST", "/append", "default"); code != 200 {
		t.Fatalf("POST /append: %d %s", code, body)
	}
	code, body := do("GET", "/logs/log-1/entries?follow=false", "")
	if code != 200 || !strings.Contains(body, `"offset"`) || strings.Count(body, "\n") != 1 {
		t.Fatalf("GET /logs/log-1/entries: %d %s, want its one entry", code, body)
	}
	if code, body := do("GET", "/logs/log-2/entries?follow=false", ""); code != 200 || strings.Contains(body, `"offset"`) {
		t.Fatalf("GET /logs/log-2/entries: %d %s, want none", code, body)
	}
	if code, body := do("GET", "/entries?follow=false", ""); code != 200 || strings.Count(body, "\n") != 1 {
		t.Fatalf("GET /entries (the default log): %d %s, want its one entry", code, body)
	}
	var st replog.Status
	code, body = do("GET", "/logs/log-1/status", "")
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Role != replog.RoleLeader || st.HighWatermark == 0 {
		t.Fatalf("GET /logs/log-1/status: %d %s", code, body)
	}

	var ls replogadmin.LogsJSON
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body = do("GET", "/logs", "")
		if code != 200 || json.Unmarshal([]byte(body), &ls) != nil {
			t.Fatalf("GET /logs: %d %s", code, body)
		}
		if len(ls.Logs) == 3 && ls.Logs[1].HW > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /logs: %s, want the default log, log-1 (committed) and log-2", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, want := range []string{"", "log-1", "log-2"} {
		if l := ls.Logs[i]; l.Name != want || l.LeaderID != "n1" || !l.Open || l.LEO < l.HW {
			t.Errorf("GET /logs [%d]: %+v, want %q led by n1, open", i, l, want)
		}
	}

	for _, path := range []string{"/logs/nosuch/status", "/logs/nosuch/append"} {
		var e apiError
		code, body := do("GET", path, "")
		if code != 404 || json.Unmarshal([]byte(body), &e) != nil || e.Code != codeUnknownLog {
			t.Errorf("GET %s: %d %s, want 404 unknown_log", path, code, body)
		}
	}
	if code, body := do("GET", "/logs/log-1/history", ""); code != 404 {
		t.Errorf("GET /logs/log-1/history: %d %s, want 404 (the node's, not a log's)", code, body)
	}
}
