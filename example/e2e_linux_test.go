package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/nodeproc"
	"github.com/replog-io/replog/internal/testwait"
)

// These tests run the real thing: the example binary in demo mode, three
// node processes talking over loopback TCP and memberlist.

// e2eVoters are the demo's voters (its default -nodes 3); its spare, n4,
// is not started with it.
var e2eVoters = []string{"n1", "n2", "n3"}

// demoProc is a running demo parent.
type demoProc struct {
	cmd     *exec.Cmd
	urls    map[string]string // node ID -> base URL (no trailing slash)
	spares  map[string]string // spare node ID -> base URL
	control string
	done    chan struct{}
	stderr  *testwait.Buffer
}

// startDemoProc runs the demo parent with data in dir until the test ends.
func startDemoProc(t *testing.T, dir string) *demoProc {
	t.Helper()
	cmd := exec.Command(exampleBinary(t), "-dir", dir, "-nosync", "-log-level", "warn")
	// If the test binary dies, the demo (and through its Pdeathsig, the nodes) die too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &demoProc{cmd: cmd, urls: map[string]string{}, spares: map[string]string{}, done: make(chan struct{}), stderr: &testwait.Buffer{}}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	var mu sync.Mutex
	go func() {
		re := regexp.MustCompile(`^dashboard (\S+) (http://\S+)/$`)
		spare := regexp.MustCompile(`^spare (\S+) (http://\S+)/ `)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			if m := re.FindStringSubmatch(line); m != nil {
				d.urls[m[1]] = m[2]
			}
			if m := spare.FindStringSubmatch(line); m != nil {
				d.spares[m[1]] = m[2]
			}
			if c, ok := strings.CutPrefix(line, "control "); ok && d.control == "" {
				d.control = c
				close(ready)
			}
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stop(t, syscall.SIGTERM)
		if t.Failed() {
			t.Logf("demo stderr:\n%s", d.stderr)
		}
	})
	select {
	case <-ready:
	case <-d.done:
		t.Fatalf("demo exited before printing its URLs:\n%s", d.stderr)
	case <-time.After(90 * time.Second):
		t.Fatalf("demo printed no URLs within 90s:\n%s", d.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(d.urls) != 3 || len(d.spares) != 1 || d.spares["n4"] == "" {
		t.Fatalf("demo printed dashboard URLs %v and spares %v, want three and n4", d.urls, d.spares)
	}
	return d
}

// stop signals the demo parent and waits for it to exit.
func (d *demoProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Errorf("demo did not exit within 60s of %v", sig)
	}
}

var client = &http.Client{Timeout: 30 * time.Second}

// appendRecord POSTs data to a node until an attempt is acknowledged and
// returns the committed entry. An attempt with an unknown outcome (the
// leader changed under it: possible on a loaded machine) may or may not be
// in the log, so the next attempt carries a distinct record: the test only
// expects acknowledged records.
func appendRecord(t *testing.T, base string, data []byte) entryJSON {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 0; ; attempt++ {
		rec := data
		if attempt > 0 {
			rec = fmt.Appendf(bytes.Clone(data), " (attempt %d)", attempt+1)
		}
		resp, err := client.Post(base+"/append", "application/octet-stream", bytes.NewReader(rec))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				var r struct{ Offset uint64 }
				if err := json.Unmarshal(body, &r); err != nil {
					t.Fatalf("append answer %q: %v", body, err)
				}
				return entryJSON{Offset: r.Offset, Data: rec}
			}
			var e apiError
			if json.Unmarshal(body, &e) != nil || (e.Outcome != outcomeFailed && e.Outcome != outcomeUnknown) {
				t.Fatalf("append to %s: %d %s: not an API error", base, resp.StatusCode, body)
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("append to %s: still failing after 60s: %v", base, err)
		}
		t.Logf("append to %s: %v; trying again", base, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// readAll reads /entries?follow=false from a node.
func readAll(t *testing.T, base string) []entryJSON {
	t.Helper()
	resp, err := client.Get(base + "/entries?follow=false")
	if err != nil {
		t.Fatalf("GET %s/entries: %v", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s/entries: %d %s", base, resp.StatusCode, b)
	}
	var out []entryJSON
	dec := json.NewDecoder(resp.Body)
	for {
		var e entryJSON
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding %s/entries: %v", base, err)
		}
		out = append(out, e)
	}
}

// waitEntries polls the nodes until they all serve the same entries (same
// offsets, same bytes) and those hold every acknowledged entry in acked.
func waitEntries(t *testing.T, urls map[string]string, ids []string, acked []entryJSON) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := map[string][]entryJSON{}
		ok := true
		for _, id := range ids {
			got[id] = readAll(t, urls[id])
			ok = ok && sameEntries(got[id], got[ids[0]]) && containsAll(got[id], acked)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, id := range ids {
				fmt.Fprintf(&b, "\n%s serves %s", id, fmtEntries(got[id]))
			}
			t.Fatalf("nodes disagree or miss acknowledged entries %s:%s", fmtEntries(acked), b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// containsAll reports whether log holds every entry of acked at its offset.
func containsAll(log, acked []entryJSON) bool {
	at := map[uint64][]byte{}
	for _, e := range log {
		at[e.Offset] = e.Data
	}
	for _, e := range acked {
		d, ok := at[e.Offset]
		if !ok || !bytes.Equal(d, e.Data) {
			return false
		}
	}
	return true
}

func sameEntries(a, b []entryJSON) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Offset != b[i].Offset || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func fmtEntries(es []entryJSON) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%d:%q", e.Offset, e.Data))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// leaderOf asks node base for the leader's ID until it knows one.
func leaderOf(t *testing.T, base string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(base + "/status")
		if err == nil {
			var st struct {
				LeaderID string `json:"leader_id"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && st.LeaderID != "" {
				return st.LeaderID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s knows no leader after 60s (last error %v)", base, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// control calls the demo's control API.
func (d *demoProc) controlCall(t *testing.T, method, path string) []nodeStateJSON {
	t.Helper()
	req, _ := http.NewRequest(method, d.control+path, nil)
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, body)
	}
	var states []nodeStateJSON
	if err := json.Unmarshal(body, &states); err != nil {
		t.Fatalf("%s %s: %q: %v", method, path, body, err)
	}
	return states
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its parent to reap it counts as exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may hold spaces, so cut at the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("node process %d is still running: orphaned", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestDemoReplicatesAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	d := startDemoProc(t, dir)

	// Appends through n1 (whatever its role) and one through n3.
	records := [][]byte{[]byte("first"), {0, 1, 2, 255, '\n', '"'}, []byte("third"), []byte("")}
	var want []entryJSON
	for i, r := range records {
		via := "n1"
		if i == 2 {
			via = "n3"
		}
		e := appendRecord(t, d.urls[via], r)
		if len(want) > 0 && e.Offset <= want[len(want)-1].Offset {
			t.Fatalf("offset %d after %d: not increasing", e.Offset, want[len(want)-1].Offset)
		}
		want = append(want, e)
	}
	// Every node serves the same committed entries: same offsets, same bytes.
	waitEntries(t, d.urls, e2eVoters, want)

	// The control API: kill a follower; the other two (a majority) go on.
	// (Killing the leader could leave an append in flight with an unknown
	// outcome; the fault tests cover that.)
	states := d.controlCall(t, "GET", "/nodes")
	var pids []int
	for _, s := range states {
		if s.Spare {
			if s.State != "stopped" {
				t.Fatalf("node states %+v: want the spare not started", states)
			}
			continue
		}
		if s.State != "running" || s.PID == 0 {
			t.Fatalf("node states %+v: want the voters running with PIDs", states)
		}
		pids = append(pids, s.PID)
	}
	// The nodes authenticate each other with a secret the demo made for
	// this run: a file only its owner can read, outside the data directory.
	secretFile := secretFileOf(t, pids[0])
	if fi, err := os.Stat(secretFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file %s: %v, %v; want mode 0600", secretFile, fi, err)
	}
	if strings.HasPrefix(secretFile, dir) {
		t.Fatalf("secret file %s is in the data directory %s", secretFile, dir)
	}

	leader := leaderOf(t, d.urls["n1"])
	var victim, via int = -1, -1
	for i, id := range e2eVoters {
		switch {
		case id == leader:
		case victim < 0:
			victim = i
		default:
			via = i
		}
	}
	vid := e2eVoters[victim]
	states = d.controlCall(t, "POST", "/nodes/"+vid+"/kill")
	if states[victim].ID != vid || states[victim].State != "stopped" || !strings.Contains(states[victim].LastExit, "killed") {
		t.Fatalf("after kill: %+v", states[victim])
	}
	if alive(pids[victim]) {
		t.Fatalf("%s (pid %d) still runs after kill", vid, pids[victim])
	}
	rec := []byte("while " + vid + " is down")
	want = append(want, appendRecord(t, d.urls[e2eVoters[via]], rec)) // through the other follower
	waitEntries(t, d.urls, []string{leader, e2eVoters[via]}, want)

	// Restarted, the victim catches up from its own data dir.
	states = d.controlCall(t, "POST", "/nodes/"+vid+"/restart")
	if states[victim].State != "running" || states[victim].PID == pids[victim] {
		t.Fatalf("after restart: %+v", states[victim])
	}
	pids[victim] = states[victim].PID
	waitEntries(t, d.urls, e2eVoters, want)

	// SIGTERM: the demo stops every node and exits cleanly.
	d.stop(t, syscall.SIGTERM)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("demo exit code %d, want 0", code)
	}
	waitGone(t, pids)
	if _, err := os.Stat(secretFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo left its secret file %s behind: %v", secretFile, err)
	}
	for _, id := range e2eVoters {
		if _, err := os.Stat(filepath.Join(dir, id, "http.addr")); err != nil {
			t.Errorf("%s: no http.addr: %v", id, err)
		}
	}
}

// TestDemoMetricsMoveAsTheClusterWorks: each node of the demo serves
// /metrics; appends through a follower move its counters and the
// leader's, every node's high watermark, and the leader alone exports
// its two followers' lag.
func TestDemoMetricsMoveAsTheClusterWorks(t *testing.T) {
	d := startDemoProc(t, t.TempDir())
	leader := leaderOf(t, d.urls["n1"])
	via := "n1"
	if leader == via {
		via = "n2"
	}
	before := map[string]map[string]float64{}
	for _, id := range e2eVoters {
		before[id] = scrape(t, d.urls[id])
	}
	const n = 3
	var acked []entryJSON
	for i := range n {
		acked = append(acked, appendRecord(t, d.urls[via], fmt.Appendf(nil, "metrics-%d", i)))
	}
	waitEntries(t, d.urls, e2eVoters, acked)
	after := map[string]map[string]float64{}
	for _, id := range e2eVoters {
		after[id] = scrape(t, d.urls[id])
	}
	m := func(id, name string, labels ...string) (float64, float64) {
		key := series(name, id, labels...)
		b, okb := before[id][key]
		a, oka := after[id][key]
		if !okb || !oka {
			t.Errorf("%s: no %s in /metrics", id, key)
		}
		return b, a
	}
	// appendRecord may retry an attempt of unknown outcome: at least n.
	if b, a := m(via, "replog_appends_total"); a-b < n {
		t.Errorf("%s: replog_appends_total %v -> %v, want +%d", via, b, a, n)
	}
	if b, a := m(via, "replog_forwarded_appends_sent_total"); a-b < n {
		t.Errorf("%s: replog_forwarded_appends_sent_total %v -> %v, want +%d", via, b, a, n)
	}
	if b, a := m(leader, "replog_forwarded_appends_received_total"); a-b < n {
		t.Errorf("%s (leader): replog_forwarded_appends_received_total %v -> %v, want +%d", leader, b, a, n)
	}
	if b, a := m(leader, "replog_fetches_served_total"); a <= b {
		t.Errorf("%s (leader): replog_fetches_served_total %v -> %v, want more", leader, b, a)
	}
	for _, id := range e2eVoters {
		if b, a := m(id, "replog_high_watermark"); a <= b {
			t.Errorf("%s: replog_high_watermark %v -> %v, want higher", id, b, a)
		}
		if _, a := m(id, "replog_role", "role", "leader"); (a == 1) != (id == leader) {
			t.Errorf("%s: replog_role{role=leader} = %v, leader is %s", id, a, leader)
		}
		lag := 0
		for k := range after[id] {
			if strings.HasPrefix(k, "replog_follower_lag_entries{") {
				lag++
			}
		}
		if want := map[bool]int{true: 2, false: 0}[id == leader]; lag != want {
			t.Errorf("%s: %d follower lag series, want %d", id, lag, want)
		}
	}
}

func TestDemoParentKilledTakesNodesAlong(t *testing.T) {
	d := startDemoProc(t, t.TempDir())
	var pids []int
	for _, s := range d.controlCall(t, "GET", "/nodes") {
		pids = append(pids, s.PID)
	}
	d.stop(t, syscall.SIGKILL)
	waitGone(t, pids)
}

func TestNodeModeHTTPAddrAndShutdown(t *testing.T) {
	dir := t.TempDir()
	// A stale file from an earlier run must not survive the start.
	if err := os.WriteFile(filepath.Join(dir, "http.addr"), []byte("127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exampleBinary(t), "-id", "solo", "-dir", dir, "-nosync", "-log-level", "off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("no output: %v", sc.Err())
	}
	addr, ok := strings.CutPrefix(sc.Text(), "http=")
	if !ok {
		t.Fatalf("first line %q, want http=ADDR", sc.Text())
	}
	file, err := os.ReadFile(filepath.Join(dir, "http.addr"))
	if err != nil || strings.TrimSpace(string(file)) != addr {
		t.Fatalf("http.addr = %q (%v), want %q", file, err, addr)
	}
	base := "http://" + addr
	e := appendRecord(t, base, []byte("solo"))
	if got := readAll(t, base); !sameEntries(got, []entryJSON{e}) {
		t.Fatalf("solo serves %s, want %s", fmtEntries(got), fmtEntries([]entryJSON{e}))
	}

	// A follow=true reader is open when SIGTERM comes: shutdown must still end.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/entries", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // ends when the node closes the stream
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node exit after SIGTERM: %v", err)
	}
}

// startNode runs the example in node mode and returns its HTTP base URL.
func startNode(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(exampleBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr := &testwait.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("node exit after SIGTERM: %v\n%s", err, stderr)
		}
	})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("node printed nothing: %v\n%s", sc.Err(), stderr)
	}
	addr, ok := strings.CutPrefix(sc.Text(), "http=")
	if !ok {
		t.Fatalf("first line %q, want http=ADDR", sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return "http://" + addr
}

// The real Log's errors reach clients as the API promises: a node of a
// three-voter cluster whose peers are all down has no leader.
func TestNodeModeErrorsWithRealLog(t *testing.T) {
	peers, err := nodeproc.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	base := startNode(t, "-id", "n1", "-dir", t.TempDir(), "-nosync", "-log-level", "off",
		"-voters", "n1,n2,n3",
		"-peers", "n2="+peers[0]+",n3="+peers[1],
		"-http-peers", "n2=http://n2.invalid,n3=http://n3.invalid",
		"-append-timeout", "1s", "-insecure")

	post := func(body []byte) (int, apiError) {
		t.Helper()
		resp, err := client.Post(base+"/append", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e apiError
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("append answer is not JSON: %v", err)
		}
		return resp.StatusCode, e
	}
	if code, e := post([]byte("nobody will commit this")); code != http.StatusServiceUnavailable || e.Outcome != outcomeFailed || !strings.Contains(e.Error, "not the leader") {
		t.Errorf("append without a leader: %d %+v, want 503 failed, not the leader", code, e)
	}
	if code, e := post(bytes.Repeat([]byte("x"), maxRecordSize+1)); code != http.StatusRequestEntityTooLarge || e.Outcome != outcomeFailed {
		t.Errorf("oversized append: %d %+v, want 413 failed", code, e)
	}
	if got := readAll(t, base); len(got) != 0 {
		t.Errorf("entries %s, want none", fmtEntries(got))
	}
	resp, err := client.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		NodeID string `json:"node_id"`
		Role   string `json:"role"`
		Voters []struct {
			ID string `json:"id"`
		} `json:"voters"`
		HW *uint64 `json:"hw"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.NodeID != "n1" || st.Role == "leader" || len(st.Voters) != 3 || st.HW == nil || *st.HW != 0 {
		t.Errorf("status %+v: want n1, not leader, 3 voters, hw 0", st)
	}
}

// runNodeExpectingFailure runs the example in node mode and returns its
// stderr once it exits; it fails t if the node starts serving instead.
func runNodeExpectingFailure(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(exampleBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr testwait.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("node %q exited 0, want a refusal\nstdout: %s\nstderr: %s", args, stdout.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("node %q still runs after 30s, want a refusal\nstdout: %s", args, stdout.String())
	}
	if strings.Contains(stdout.String(), "http=") {
		t.Fatalf("refused node announced an address: %s", stdout.String())
	}
	return stderr.String()
}

// A node of a cluster with no credentials is refused, and says which
// flags to use; the same node with -secret-file starts (the control).
func TestNodeModeRefusesUnauthenticatedCluster(t *testing.T) {
	peers, err := nodeproc.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-id", "n1", "-dir", t.TempDir(), "-nosync", "-log-level", "off",
		"-voters", "n1,n2,n3", "-peers", "n2=" + peers[0] + ",n3=" + peers[1]}
	stderr := runNodeExpectingFailure(t, args...)
	for _, want := range []string{"Secret", "-secret-file", "-insecure"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("refusal does not mention %s: %s", want, stderr)
		}
	}
	secret, err := writeSecretFile(t.TempDir(), "secret")
	if err != nil {
		t.Fatal(err)
	}
	base := startNode(t, append(args, "-secret-file", secret)...)
	resp, err := client.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("node with -secret-file: /status %d", resp.StatusCode)
	}
}

// A second process on a live node's directory is refused (the directory is
// locked) and leaves the live node's http.addr alone.
func TestRefusedSecondProcessKeepsHTTPAddr(t *testing.T) {
	dir := t.TempDir()
	base := startNode(t, "-id", "solo", "-dir", dir, "-nosync", "-log-level", "off")
	addrFile := filepath.Join(dir, "http.addr")
	before, err := os.ReadFile(addrFile)
	if err != nil || "http://"+strings.TrimSpace(string(before)) != base {
		t.Fatalf("http.addr = %q (%v), want %s", before, err, base)
	}
	stderr := runNodeExpectingFailure(t, "-id", "solo", "-dir", dir, "-nosync", "-log-level", "off")
	if !strings.Contains(stderr, "lock") {
		t.Errorf("second process's refusal does not say the directory is locked: %s", stderr)
	}
	after, err := os.ReadFile(addrFile)
	if err != nil || string(after) != string(before) {
		t.Fatalf("after the refused second process http.addr = %q (%v), want %q", after, err, before)
	}
	appendRecord(t, base, []byte("the live node still serves"))
}

// writePKI writes a CA and a certificate for each name (as its DNS name
// and common name) in PEM files under dir: ca.pem, NAME.pem, NAME.key.
func writePKI(t *testing.T, dir string, names ...string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "CERTIFICATE", caDER, 0o644)
	for i, name := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			DNSNames: []string{name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", "CERTIFICATE", der, 0o644)
		write(name+".key", "PRIVATE KEY", keyDER, 0o600)
	}
}

// Two nodes with -tls-cert/-tls-key/-tls-ca (mutual TLS, certificates
// bound to node IDs) form a cluster without a secret: an append through
// one is read on the other. (The refusals of untrusted or borrowed
// certificates are the library's tests, tls_test.go.)
func TestNodeModeMutualTLS(t *testing.T) {
	pki := t.TempDir()
	writePKI(t, pki, "n1", "n2")
	rpc, err := nodeproc.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	peers := "n1=" + rpc[0] + ",n2=" + rpc[1]
	node := func(id, certName, rpcAddr string) []string {
		return []string{"-id", id, "-dir", t.TempDir(), "-nosync", "-log-level", "off",
			"-voters", "n1,n2", "-peers", peers, "-rpc", rpcAddr,
			"-tls-cert", filepath.Join(pki, certName+".pem"), "-tls-key", filepath.Join(pki, certName+".key"),
			"-tls-ca", filepath.Join(pki, "ca.pem")}
	}
	n1 := startNode(t, node("n1", "n1", rpc[0])...)
	n2 := startNode(t, node("n2", "n2", rpc[1])...)
	e := appendRecord(t, n1, []byte("over mutual TLS"))
	waitEntries(t, map[string]string{"n1": n1, "n2": n2}, []string{"n1", "n2"}, []entryJSON{e})
}

// secretFileOf returns the -secret-file argument of process pid.
func secretFileOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "-insecure" {
			t.Fatalf("the demo runs its nodes with -insecure: %q", args)
		}
		if a == "-secret-file" && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("node %d has no -secret-file: %q", pid, args)
	return ""
}

// The retention flags reach replog's Options: a node with small segments
// and -retention-bytes (which counts the files' bytes on disk) drops its
// oldest segment files as it is written
// (the log start moves without any explicit deletion), a read from
// offset 0 then answers 416 naming the log start, and a read without
// from starts there.
func TestNodeModeRetentionFlags(t *testing.T) {
	dir := t.TempDir()
	base := startNode(t, "-id", "solo", "-dir", dir, "-nosync", "-log-level", "off",
		"-segment-bytes", "64KiB", "-retention-bytes", "256KiB")
	status := func() (logStart, hw uint64) {
		t.Helper()
		resp, err := client.Get(base + "/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			LogStart uint64 `json:"log_start"`
			HW       uint64 `json:"hw"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st.LogStart, st.HW
	}
	segments := func() []string {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "replog-*.seg"))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	// 3 MiB in 4 KiB records: 48 segments' worth, 12 times the bound.
	// Once the node has raised its level to 7 its commit journal (8 MiB)
	// takes the appends, and only a checkpoint moves them into the
	// segments (where they roll and retention counts them): the first
	// comes when a quarter of the journal, 2 MiB, is pending.
	record := bytes.Repeat([]byte("r"), 4<<10)
	var last entryJSON
	for i := range 768 {
		last = appendRecord(t, base, fmt.Appendf(bytes.Clone(record), "%d", i))
	}
	// The leader applies its policies every second; the files of the
	// segments wholly below the new log start go once the deletion is on
	// disk. Each sealed file here is 64 KiB (bbolt's smallest growth
	// step): 256 KiB keep at most 4 besides the active one (one more than
	// the bound, replog's Options say).
	testwait.WaitFor(t, "-retention-bytes to move the log start and leave a few segment files", 30*time.Second, func() bool {
		ls, _ := status()
		return ls > 0 && len(segments()) <= 5
	})
	logStart, hw := status()
	if logStart >= hw {
		t.Errorf("log start %d, HW %d: the last committed entry went too", logStart, hw)
	}
	resp, err := client.Get(base + "/entries?from=0&follow=false")
	if err != nil {
		t.Fatal(err)
	}
	var e apiError
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || e.LogStart == nil || *e.LogStart < logStart {
		t.Errorf("read from 0 below log start %d: %d %+v (%v), want 416 naming the log start", logStart, resp.StatusCode, e, err)
	}
	// The entries above the last record are the log's own (the voter set
	// and the feature level entry, copied above the log start as it
	// moves): readers do not see them.
	got := readAll(t, base)
	if len(got) == 0 || got[0].Offset < logStart || got[len(got)-1].Offset >= hw || got[len(got)-1].Offset != last.Offset {
		var offs []uint64
		for _, e := range got {
			offs = append(offs, e.Offset)
		}
		t.Errorf("read without from: offsets %v, want them from the log start %d to the last record %d (HW %d)", offs, logStart, last.Offset, hw)
	}
	t.Logf("log start %d, last record %d, HW %d, %d sealed segment files", logStart, last.Offset, hw, len(segments()))
}

// statusOf returns node base's /status.
func statusOf(t *testing.T, base string) (st struct {
	Role        string              `json:"role"`
	LeaderID    string              `json:"leader_id"`
	DirectoryID string              `json:"directory_id"`
	Voters      []replogVoterStatus `json:"voters"`
	Observers   []replogIncarnation `json:"observers"`
	Replacing   []replogIncarnation `json:"replacing"`
}, ok bool) {
	t.Helper()
	resp, err := client.Get(base + "/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil
}

// The JSON of replog.VoterStatus and replog.Incarnation, as a client that
// does not import replog reads it.
type (
	replogVoterStatus struct {
		ID          string `json:"id"`
		DirectoryID string `json:"directory_id"`
		CaughtUp    bool   `json:"caught_up"`
	}
	replogIncarnation struct {
		ID          string `json:"id"`
		DirectoryID string `json:"directory_id"`
	}
)

// TestDemoMembership: the demo's spare node, started through the control
// API, joins as an observer and is made a voter through /voters/add on
// another node; a voter wiped through the control API (its data directory
// deleted) comes back with a new directory and is made a voter again by
// the leader on its own; /voters/remove removes the spare again;
// /leader/transfer through a follower makes the third voter the leader.
func TestDemoMembership(t *testing.T) {
	d := startDemoProc(t, t.TempDir())
	leader := leaderOf(t, d.urls["n1"])
	post := func(base, path string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 90 * time.Second}).Post(base+path, "text/plain", nil)
		if err != nil {
			t.Fatalf("POST %s%s: %v", base, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	voterAt := func(id, dir string) bool {
		st, ok := statusOf(t, d.urls[leaderOf(t, d.urls["n1"])])
		for _, v := range st.Voters {
			if ok && v.ID == id && v.DirectoryID == dir {
				return true
			}
		}
		return false
	}
	appendRecord(t, d.urls[leader], []byte("before n4"))

	// The spare: started, an observer, then a voter.
	d.controlCall(t, "POST", "/nodes/n4/restart")
	n4 := d.spares["n4"]
	st4, ok := statusOf(t, n4)
	if !ok || st4.Role != "observer" || st4.DirectoryID == "" {
		t.Fatalf("n4 after its start: %+v (%v), want an observer with a directory", st4, ok)
	}
	via := "n1"
	if via == leader {
		via = "n2"
	}
	if code, body := post(d.urls[via], "/voters/add?node=n4"); code != http.StatusOK || !strings.Contains(body, `"id":"n4"`) {
		t.Fatalf("/voters/add?node=n4 via %s: %d %s", via, code, body)
	}
	if !voterAt("n4", st4.DirectoryID) {
		t.Fatal("n4 is not a voter at its directory after /voters/add")
	}

	// A follower wiped: a new incarnation, replaced automatically.
	var wiped string
	for _, id := range e2eVoters {
		if id != leader {
			wiped = id
			break
		}
	}
	before, _ := statusOf(t, d.urls[wiped])
	d.controlCall(t, "POST", "/nodes/"+wiped+"/wipe")
	after, ok := statusOf(t, d.urls[wiped])
	if !ok || after.DirectoryID == "" || after.DirectoryID == before.DirectoryID {
		t.Fatalf("%s's directory %q before the wipe, %q after (%v): want a new one", wiped, before.DirectoryID, after.DirectoryID, ok)
	}
	testwait.WaitFor(t, wiped+" a voter again at its new directory", 60*time.Second, func() bool { return voterAt(wiped, after.DirectoryID) })

	// The spare removed again.
	if code, body := post(d.urls[leader], "/voters/remove?node=n4"); code != http.StatusOK || strings.Contains(body, `"id":"n4"`) {
		t.Fatalf("/voters/remove?node=n4: %d %s", code, body)
	}
	if code, body := post(d.urls[leader], "/voters/remove?node=n4"); code != http.StatusNotFound {
		t.Fatalf("/voters/remove?node=n4 again: %d %s, want 404", code, body)
	}

	// Leadership handed over through a node that does not lead (it
	// forwards to the leader) to the third voter; an append made right
	// after is committed.
	leader = leaderOf(t, d.urls["n1"])
	var via2, to string
	for _, id := range e2eVoters {
		switch {
		case id == leader:
		case via2 == "":
			via2 = id
		default:
			to = id
		}
	}
	code, body := post(d.urls[via2], "/leader/transfer?to="+to)
	var tr transferJSON
	if err := json.Unmarshal([]byte(body), &tr); err != nil || code != http.StatusOK || tr.From != leader || tr.Via != via2 || tr.Leader == leader {
		t.Fatalf("/leader/transfer?to=%s via %s (leader %s): %d %s", to, via2, leader, code, body)
	}
	testwait.WaitFor(t, to+" leading after the transfer", 30*time.Second, func() bool {
		st, ok := statusOf(t, d.urls[to])
		return ok && st.LeaderID == tr.Leader && st.Role == "leader"
	})
	appendRecord(t, d.urls[leader], []byte("after the transfer"))
}
