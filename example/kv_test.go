package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// TestKVEndpoints: /kv/{key} on a real Log: put, get, create and update
// refused with 409 and the revision found, history, keys, delete.
func TestKVEndpoints(t *testing.T) {
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := startKV(l, kv.Options{}, hclog.NewNullLogger())
	defer store.stop()
	for store.get() == nil {
		if ctx.Err() != nil {
			t.Fatal("the KV did not open")
		}
		time.Sleep(time.Millisecond)
	}
	s := &server{node: l, kv: store, self: "n1", appendTimeout: 10 * time.Second, maxRecord: maxRecordSize, logger: hclog.NewNullLogger()}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	do := func(method, path, body string) (int, map[string]any) {
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
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %s", method, path, b)
		}
		return resp.StatusCode, m
	}
	code, m := do("PUT", "/kv/color", "blue")
	if code != http.StatusOK {
		t.Fatalf("put: %d %v", code, m)
	}
	rev := uint64(m["revision"].(float64))
	if code, m := do("GET", "/kv/color", ""); code != http.StatusOK || m["value"] != "blue" || m["revision"] != float64(rev) {
		t.Fatalf("get: %d %v", code, m)
	}
	if code, m := do("GET", "/kv/color?linearizable=1", ""); code != http.StatusOK || m["value"] != "blue" {
		t.Fatalf("linearizable get: %d %v", code, m)
	}
	if code, m := do("PUT", "/kv/color?create=1", "red"); code != http.StatusConflict || m["code"] != "exists" {
		t.Fatalf("create of a set key: %d %v", code, m)
	}
	if code, m := do("PUT", fmt.Sprintf("/kv/color?expected=%d", rev+1000), "red"); code != http.StatusConflict || m["current"] != float64(rev) {
		t.Fatalf("update at a wrong revision: %d %v", code, m)
	}
	code, m = do("PUT", fmt.Sprintf("/kv/color?expected=%d", rev), "green")
	if code != http.StatusOK {
		t.Fatalf("update: %d %v", code, m)
	}
	rev = uint64(m["revision"].(float64))
	code, m = do("GET", "/kv/color?history=1", "")
	if h, _ := m["history"].([]any); code != http.StatusOK || len(h) != 2 {
		t.Fatalf("history: %d %v", code, m)
	}
	if code, m := do("GET", "/kv/", ""); code != http.StatusOK || fmt.Sprint(m["keys"]) != "[color]" {
		t.Fatalf("keys: %d %v", code, m)
	}
	code, m = do("GET", "/kv/?all=1&linearizable=1", "")
	if es, _ := m["entries"].([]any); code != http.StatusOK || len(es) != 1 || fmt.Sprint(es[0]) != fmt.Sprintf("map[key:color revision:%d value:green]", rev) ||
		m["next"] != float64(rev+1) || m["opens"] != float64(1) || m["restored_at"] != float64(0) {
		t.Fatalf("the whole state: %d %v", code, m)
	}
	if code, m := do("DELETE", "/kv/color", ""); code != http.StatusOK {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, m := do("GET", "/kv/color", ""); code != http.StatusNotFound {
		t.Fatalf("get after delete: %d %v", code, m)
	}
	if code, _ := do("PATCH", "/kv/color", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("PATCH: %d", code)
	}
	s.kv = nil
	if code, _ := do("GET", "/kv/color", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("without a KV: %d", code)
	}
	if code, m := do("PUT", "/kv/color", "red"); code != http.StatusServiceUnavailable || m["outcome"] != "failed" {
		t.Fatalf("a write without a KV: %d %v, want 503 and nothing appended", code, m)
	}
}
