package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replog-io/replog/replogadmin"
	"github.com/replog-io/replog/replogtest"
)

// startNodeWithLogs opens a single-node Node with the named logs given,
// appending each log's records (replogtest.NewNode), and serves its
// replogadmin.NewNode handler under /admin; it returns the server's
// HOST:PORT.
func startNodeWithLogs(t *testing.T, logs map[string][]string) string {
	t.Helper()
	recs := map[string][][]byte{}
	for name, rs := range logs {
		for _, r := range rs {
			recs[name] = append(recs[name], []byte(r))
		}
	}
	n := replogtest.NewNode(t, "n1", recs)
	h, err := replogadmin.NewNode(n, replogadmin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestLogs: logs lists a Node's logs (the default first) with each one's
// leader, LEO, HW and replicas; status, tail and the changes address one
// with --log; an unknown log, and a Log's handler asked for logs, fail
// with errors that say so.
func TestLogs(t *testing.T) {
	addr := startNodeWithLogs(t, map[string][]string{"orders": {"o1", "o2"}, "payments": {"p1"}})

	code, out, errOut := runCmd(t, "logs", "--addr", addr)
	if code != exitOK || errOut != "" {
		t.Fatalf("logs: exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "node n1: 3 logs" || !strings.HasPrefix(lines[1], "NAME") ||
		!strings.HasPrefix(lines[2], "(default)") || !strings.HasPrefix(lines[3], "orders") || !strings.HasPrefix(lines[4], "payments") {
		t.Fatalf("logs output:\n%s", out)
	}
	for _, l := range lines[3:] {
		if f := strings.Fields(l); len(f) != 6 || f[1] != "n1" || f[4] != "n1*" || f[5] != "open" {
			t.Errorf("logs line %q: want leader n1, replicas n1*, open", l)
		}
	}
	code, out, _ = runCmd(t, "logs", "--addr", addr, "--json")
	if code != exitOK || !strings.Contains(out, `"name":"orders"`) {
		t.Errorf("logs --json: exit %d, %q", code, out)
	}

	// status --log inspects the named log, not the default one.
	code, out, errOut = runCmd(t, "status", "--addr", addr, "--log", "orders")
	if code != exitOK || !strings.Contains(out, "role            leader") || errOut != "" {
		t.Fatalf("status --log orders: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCmd(t, "tail", "--addr", addr, "--log", "orders", "--from", "0", "--follow=false")
	if code != exitOK || !strings.Contains(out, "\to1\n") || !strings.Contains(out, "\to2\n") || strings.Contains(out, "p1") {
		t.Errorf("tail --log orders: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "tail", "--addr", addr, "--from", "0", "--follow=false")
	if code != exitOK || strings.Contains(out, "o1") {
		t.Errorf("tail of the default log shows a named log's records: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCmd(t, "status", "--addr", addr, "--log", "nosuch"); code != exitFailure || !strings.Contains(errOut, "nosuch") {
		t.Errorf("status --log nosuch: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runCmd(t, "status", "--addr", addr, "--log", "a/b"); code != exitUsage {
		t.Errorf("status --log a/b: exit %d, want %d", code, exitUsage)
	}

	// A Log's handler has no list of logs.
	_, single := startNode(t, "/admin", replogadmin.Options{})
	if code, _, errOut := runCmd(t, "logs", "--addr", single); code != exitFailure || !strings.Contains(errOut, "serves one Log") {
		t.Errorf("logs against a Log's handler: exit %d, stderr %q", code, errOut)
	}
}
