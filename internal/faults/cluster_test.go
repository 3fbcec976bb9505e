package faults

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The harness's use of its supervisor, on the fake node: kills and
// restarts count incarnations and are not crashes; an exit the harness
// did not cause is a crash, and that node can be started again; pause and
// resume; Stop leaves nothing running.
func TestHarnessSupervisesNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := t.TempDir()
	mod, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := BuildNode(ctx, mod, root, "./internal/faults/internal/fakenode", "", false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartCluster(ctx, ClusterConfig{Bin: bin, Root: root, Nodes: 3,
		FetchTimeout: time.Second, ElectionTimeout: 300 * time.Millisecond, FetchMaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	for _, n := range c.Nodes {
		if !n.Running() || n.Incarnation() != 1 {
			t.Fatalf("%s after StartCluster: running %v, incarnation %d", n.ID, n.Running(), n.Incarnation())
		}
	}

	// A kill by the harness, then a restart: a new incarnation, no crash.
	if killed := c.Kill(n1); len(killed) != 1 || n1.Running() {
		t.Fatalf("Kill(n1) = %v, running %v", killed, n1.Running())
	}
	if killed := c.Kill(n1); len(killed) != 0 {
		t.Fatalf("Kill of a stopped node killed %v", killed)
	}
	if err := c.Start(n1); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(n1); err == nil {
		t.Fatalf("second Start of a running node succeeded")
	}
	if err := c.WaitReady(ctx, n1); err != nil {
		t.Fatal(err)
	}
	if n1.Incarnation() != 2 || len(c.Crashes()) != 0 {
		t.Fatalf("after kill and restart: incarnation %d, crashes %v", n1.Incarnation(), c.Crashes())
	}

	// Pause and resume.
	if !c.Pause(n2) || !n2.Paused() {
		t.Fatalf("Pause(n2) failed")
	}
	if !c.Resume(n2) || n2.Paused() {
		t.Fatalf("Resume(n2) failed")
	}
	if err := c.WaitReady(ctx, n2); err != nil {
		t.Fatal(err)
	}

	// An exit the harness did not cause is a crash; the node restarts.
	if err := syscall.Kill(n2.proc.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.proc.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	crashes := c.Crashes()
	if len(crashes) != 1 || !strings.HasPrefix(crashes[0], "n2 exited on its own") {
		t.Fatalf("crashes %q, want one of n2", crashes)
	}
	if err := c.Start(n2); err != nil {
		t.Fatalf("restart after a crash: %v", err)
	}
	if err := c.WaitReady(ctx, n2); err != nil {
		t.Fatal(err)
	}

	var pids []int
	for _, n := range c.Nodes {
		pids = append(pids, n.proc.PID())
	}
	c.Stop()
	c.Stop() // idempotent
	for i, n := range c.Nodes {
		if n.Running() {
			t.Errorf("%s runs after Stop", n.ID)
		}
		if err := syscall.Kill(pids[i], 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after Stop: %v", n.ID, pids[i], err)
		}
	}
	if len(c.Crashes()) != 1 {
		t.Errorf("Stop added crashes: %q", c.Crashes())
	}
}
