package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogadmin"
)

// fakeNode serves GET /admin/status as a node's replogadmin handler does,
// with a status no single-node Log has (followers, a failure).
type fakeNode struct {
	status replog.Status
}

func (f *fakeNode) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/admin/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f.status)
	})
	return mux
}

func startFake(t *testing.T, f *fakeNode) string {
	t.Helper()
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// startNode opens a single-node Log and serves its admin handler under
// path on a test server; it returns the Log and the server's HOST:PORT.
func startNode(t *testing.T, path string, opts replogadmin.Options) (*replog.Log, string) {
	t.Helper()
	l, err := replog.Open(replog.Options{NodeID: "n1", Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := l.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := replogadmin.New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(path+"/", http.StripPrefix(path, h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return l, strings.TrimPrefix(srv.URL, "http://")
}

func leaderStatus() replog.Status {
	return replog.Status{NodeID: "n1", Role: replog.RoleLeader, Epoch: 4, LeaderID: "n1",
		Voters: []replog.VoterStatus{
			{ID: "n1", DirectoryID: "d1aaaaaaaaaa", CaughtUp: true},
			{ID: "n2", DirectoryID: "d2bbbbbbbbbb", CaughtUp: true},
			{ID: "n3", DirectoryID: "d3cccccccccc"},
		},
		Observers: []replog.Incarnation{{ID: "n4", DirectoryID: "d4dddddddddd"}},
		LEO:       12, DurableLEO: 12, HighWatermark: 10, ReadableHW: 10, RemoteLEO: map[string]uint64{"n2": 12, "n3": 9},
		RPCAddr: "127.0.0.1:9001", GossipAddr: "127.0.0.1:9002"}
}

func TestStatus(t *testing.T) {
	addr := startFake(t, &fakeNode{status: leaderStatus()})
	code, out, errOut := runCmd(t, "status", "--addr", addr)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"role            leader", "epoch           4", "voters          n1/d1aaaaaa,n2/d2bbbbbb,n3/d3cccccc (behind)", "observers       n4/d4dddddd",
		"leo             12 (durable 12)", "high watermark  10 (readable here 10)",
		"followers       n2 leo 12 (0 behind)", "n3 leo 9 (3 behind)", "gossip          127.0.0.1:9002"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}

	// --json is the node's own answer; an http:// URL works as --addr.
	code, out, _ = runCmd(t, "status", "--addr", "http://"+addr+"/", "--json")
	var st replog.Status
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil || st.Role != replog.RoleLeader || st.RemoteLEO["n3"] != 9 {
		t.Errorf("--json: exit %d, %q", code, out)
	}
}

func TestStatusFailures(t *testing.T) {
	failed := leaderStatus()
	failed.Role, failed.LeaderID, failed.RemoteLEO = replog.RoleFollower, "", nil
	failed.Error = "replog: storage failed: disk full"
	addr := startFake(t, &fakeNode{status: failed})
	code, out, errOut := runCmd(t, "status", "--addr", addr)
	if code != exitFailure || !strings.Contains(out, "leader          (none known)") || !strings.Contains(errOut, "disk full") {
		t.Errorf("a failed node: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}

	// Nothing listens there.
	ln := httptest.NewServer(http.NotFoundHandler())
	dead := strings.TrimPrefix(ln.URL, "http://")
	ln.Close()
	if code, _, errOut := runCmd(t, "status", "--addr", dead, "--timeout", "5s"); code != exitFailure || !strings.Contains(errOut, "connect") {
		t.Errorf("unreachable node: exit %d, stderr %q", code, errOut)
	}
	// Something else listens there.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if code, _, errOut := runCmd(t, "status", "--addr", other.URL); code != exitFailure || !strings.Contains(errOut, "404") {
		t.Errorf("not a node: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{"status"}, {"status", "--addr", "ftp://x"}, {"status", "--addr", addr, "extra"}} {
		if code, _, _ := runCmd(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestTail(t *testing.T) {
	l, addr := startNode(t, "/admin", replogadmin.Options{})
	ctx := context.Background()
	var offs []uint64
	for _, rec := range [][]byte{[]byte("hello world"), {0, 1, 2, 0xff}, {}} {
		off, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	if err := l.Barrier(ctx); err != nil { // a control entry: a gap in the offsets
		t.Fatal(err)
	}
	last, err := l.Append(ctx, []byte("after the barrier"))
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCmd(t, "tail", "--addr", addr, "--from", "0", "--follow=false")
	want := fmt.Sprintf("%d\t1\thello world\n%d\t1\tbase64:AAEC/w==\n%d\t1\t\n%d\t1\tafter the barrier\n", offs[0], offs[1], offs[2], last)
	if code != exitOK || out != want {
		t.Fatalf("tail: exit %d, stderr %q, output\n%q\nwant\n%q", code, errOut, out, want)
	}
	code, out, _ = runCmd(t, "tail", "--addr", addr, "--from", "0", "--json", "--max", "1")
	var en replogadmin.EntryJSON
	if code != exitOK || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &en) != nil || en.Offset != offs[0] || string(en.Data) != "hello world" || en.Time.IsZero() {
		t.Errorf("tail --json --max 1: exit %d, %q", code, out)
	}
	// Pages end at the high watermark as of the call, even when the
	// first page is not the last: --max 2 from the second record.
	code, out, _ = runCmd(t, "tail", "--addr", addr, "--from", fmt.Sprint(offs[1]), "--follow=false", "--max", "2")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || len(lines) != 2 || !strings.HasPrefix(lines[0], fmt.Sprint(offs[1])) {
		t.Errorf("tail --from %d --max 2: exit %d, %q", offs[1], code, out)
	}

	// Following from the readable HW (no --from): the next entry shows up.
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var tailOut syncWriter
	tailOut.w = &strings.Builder{}
	done := make(chan int)
	go func() {
		done <- run(fctx, []string{"tail", "--addr", addr, "--max", "1"}, &tailOut, os.Stderr)
	}()
	// Appended until tail sees one: whether an append lands before tail
	// read the HW or after, a later one is new to it.
	var code2 int
	for waiting := true; waiting; {
		if _, err := l.Append(ctx, []byte("news")); err != nil {
			t.Fatal(err)
		}
		select {
		case code2 = <-done:
			waiting = false
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got := tailOut.String(); code2 != exitOK || !strings.HasSuffix(strings.TrimSpace(got), "\tnews") || strings.Count(got, "\n") != 1 {
		t.Errorf("tail following: exit %d, output %q", code2, got)
	}

	// The node's errors: --from below the log start names where to resume.
	if _, err := l.DeleteBefore(ctx, offs[2]); err != nil {
		t.Fatal(err)
	}
	start := l.Status().LogStart
	code, _, errOut = runCmd(t, "tail", "--addr", addr, "--from", "0", "--follow=false")
	if code != exitFailure || !strings.Contains(errOut, fmt.Sprintf("resume with --from %d", start)) {
		t.Errorf("from below the log start %d: exit %d, stderr %q", start, code, errOut)
	}
	if code, _, _ := runCmd(t, "tail", "--addr", addr, "--from", "x"); code != exitUsage {
		t.Errorf("--from x: exit %d, want %d", code, exitUsage)
	}
}

// --path finds a handler mounted elsewhere; a wrong one says to check it.
func TestPath(t *testing.T) {
	_, addr := startNode(t, "/ops/replog", replogadmin.Options{})
	if code, out, errOut := runCmd(t, "status", "--addr", addr, "--path", "/ops/replog/"); code != exitOK || !strings.Contains(out, "role            leader") {
		t.Errorf("status --path /ops/replog/: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "status", "--addr", addr); code != exitFailure || !strings.Contains(errOut, "--path") || !strings.Contains(errOut, "404") {
		t.Errorf("status at the default path of a service mounting elsewhere: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{
		{"status", "--addr", "http://" + addr + "/ops/replog"},
		{"status", "--addr", addr, "--path", "ops"},
	} {
		if code, _, errOut := runCmd(t, args...); code != exitUsage || !strings.Contains(errOut, "--path") {
			t.Errorf("%q: exit %d, %q; want a usage error pointing at --path", args, code, errOut)
		}
	}
}

func TestTailInterrupted(t *testing.T) {
	// A node that never answers a page request.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		var out, errOut strings.Builder
		done <- run(ctx, []string{"tail", "--addr", srv.URL, "--from", "0"}, &out, &errOut)
	}()
	time.Sleep(100 * time.Millisecond)
	cancel() // Ctrl-C
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("interrupted tail: exit %d, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tail did not end when interrupted")
	}
}

// TestAgainstExampleNode runs both commands against a real node of the
// example service.
func TestAgainstExampleNode(t *testing.T) {
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "example")
	if out, err := exec.Command("go", "build", "-o", bin, "../../example").CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-id", "n1", "-dir", filepath.Join(tmp, "n1"), "-nosync", "-log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "http="); ok {
				addrCh <- a
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(90 * time.Second):
		t.Fatal("the example node printed no http= line")
	}
	for _, rec := range []string{"first", "second"} {
		resp, err := http.Post("http://"+addr+"/append", "text/plain", strings.NewReader(rec))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("append %q: %v %v", rec, err, resp)
		}
		resp.Body.Close()
	}

	code, out, errOut := runCmd(t, "status", "--addr", addr)
	if code != exitOK || !strings.Contains(out, "node            n1") || !strings.Contains(out, "role            leader") {
		t.Errorf("status: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, errOut = runCmd(t, "tail", "--addr", addr, "--from", "0", "--follow=false")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 2 || !strings.HasSuffix(lines[0], "\tfirst") || !strings.HasSuffix(lines[1], "\tsecond") {
		t.Fatalf("tail: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	// Following from the high watermark: the next entry shows up (from
	// the HW read here, so that it does not matter whether the append
	// lands before tail's request or while it waits).
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st replog.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var tailOut strings.Builder
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"tail", "--addr", addr, "--from", fmt.Sprint(st.HighWatermark), "--max", "1"}, &syncWriter{w: &tailOut}, os.Stderr)
	}()
	resp, err = http.Post("http://"+addr+"/append", "text/plain", strings.NewReader("third"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("append: %v %v", err, resp)
	}
	resp.Body.Close()
	if code := <-done; code != exitOK || !strings.HasSuffix(strings.TrimSpace(tailOut.String()), "\tthird") {
		t.Errorf("tail following: exit %d, output %q; want the entry appended after it started", code, tailOut.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
