package replogtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/testwait"
)

func appendCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// has waits until l has committed data at off.
func has(t *testing.T, l *replog.Log, off uint64, data string) {
	t.Helper()
	for e, err := range l.ReadRange(appendCtx(t), off, off+1) {
		if err != nil {
			t.Fatalf("%s: read %d: %v", l.Status().NodeID, off, err)
		}
		if string(e.Data) != data {
			t.Fatalf("%s: offset %d holds %q, want %q", l.Status().NodeID, off, e.Data, data)
		}
		return
	}
	t.Fatalf("%s: offset %d: no entry", l.Status().NodeID, off)
}

func TestClusterReplicates(t *testing.T) {
	c := NewCluster(t, 3, Configure(func(id string, o *replog.Options) { o.NoSync = false }))
	if got := c.IDs(); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("IDs %v", got)
	}
	lead := c.Leader()
	fs := c.Followers()
	if len(fs) != 2 || slices.Contains(fs, lead) {
		t.Fatalf("followers %v of leader %s", fs, lead.Status().NodeID)
	}
	// Appends go through any node (a follower forwards them).
	off, err := fs[0].Append(appendCtx(t), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.IDs() {
		has(t, c.Node(id), off, "x")
	}
	for _, id := range c.IDs() {
		if st := c.Node(id).Status(); st.LeaderID != lead.Status().NodeID || len(st.Voters) != 3 {
			t.Fatalf("%s: %+v", id, st)
		}
	}
}

// TestKillIsACrash: the killed leader hands nothing over (its Close tries
// and fails: the links are cut), the others elect a new leader, which has
// every acknowledged entry, and the killed node restarts on its
// directory with its log and catches up.
func TestKillIsACrash(t *testing.T) {
	logs := map[string]*testwait.Buffer{}
	c := NewCluster(t, 3, Configure(func(id string, o *replog.Options) {
		if logs[id] == nil {
			logs[id] = &testwait.Buffer{}
		}
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: logs[id], Level: hclog.Info})
	}))
	old := c.WaitLeader()
	off, err := c.Node(old).Append(appendCtx(t), []byte("before"))
	if err != nil {
		t.Fatal(err)
	}
	before := c.Node(old).Status().LEO
	c.Kill(old)
	if c.Node(old) != nil || slices.Contains(c.Running(), old) {
		t.Fatalf("killed %s still listed: %v", old, c.Running())
	}
	if !strings.Contains(logs[old].String(), "closing without handing the leadership over") {
		t.Fatalf("the killed leader's log says nothing of a failed handover:\n%s", logs[old].String())
	}
	lead := c.WaitLeader()
	if lead == old {
		t.Fatalf("killed %s is leader", old)
	}
	has(t, c.Node(lead), off, "before")
	off2, err := c.Node(lead).Append(appendCtx(t), []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Restart(old)
	if st := l.Status(); st.LEO < before {
		t.Fatalf("restarted %s has LEO %d, had %d: its directory was not reused", old, st.LEO, before)
	}
	has(t, l, off2, "after")
	c.WaitLeader()
}

// TestStopHandsOver: Stop is a graceful Close, whose handover succeeds.
func TestStopHandsOver(t *testing.T) {
	var buf testwait.Buffer
	c := NewCluster(t, 3, Configure(func(id string, o *replog.Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	}))
	old := c.WaitLeader()
	c.Stop(old)
	if !strings.Contains(buf.String(), "closing: leadership handed over") {
		t.Fatalf("the stopped leader did not hand over:\n%s", buf.String())
	}
	if lead := c.WaitLeader(); lead == old {
		t.Fatalf("stopped %s is leader", old)
	}
}

// TestPartitionIsolatesTheLeader: cut off, the old leader commits nothing;
// the others elect a leader and commit; healed, the old one follows the
// new leader and has what it committed.
func TestPartitionIsolatesTheLeader(t *testing.T) {
	c := NewCluster(t, 3)
	old := c.WaitLeader()
	c.Partition(old)
	lead := c.WaitLeader()
	if lead == old {
		t.Fatalf("isolated %s still counted as leader", old)
	}
	off, err := c.Node(lead).Append(appendCtx(t), []byte("majority"))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.Node(old).Append(short, []byte("minority")); err == nil {
		t.Fatal("the isolated node committed an append")
	}
	if hw := c.Node(old).Status().HighWatermark; hw > off {
		t.Fatalf("the isolated node's HW %d passed the majority's entry at %d", hw, off)
	}
	c.Heal()
	// WaitLeader counts the healed node again: it follows the leader.
	got := c.WaitLeader()
	if st := c.Node(old).Status(); st.LeaderID != got {
		t.Fatalf("healed %s follows %q, want %s", old, st.LeaderID, got)
	}
	has(t, c.Node(old), off, "majority")
}

// TestPauseHoldsBytes: a paused follower receives nothing (the others
// commit without it), and catches up once resumed.
func TestPauseHoldsBytes(t *testing.T) {
	c := NewCluster(t, 3)
	lead := c.WaitLeader()
	var f string
	for _, id := range c.IDs() {
		if id != lead {
			f = id
			break
		}
	}
	c.Pause(f)
	var first, off uint64
	for i := range 5 {
		var err error
		if off, err = c.Node(lead).Append(appendCtx(t), fmt.Appendf(nil, "p%d", i)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = off
		}
	}
	// Appended after the pause began, none of them can have reached it.
	if got := c.Node(f).Status(); got.LEO > first || got.HighWatermark > first {
		t.Fatalf("paused %s received entries appended from offset %d on: LEO %d, HW %d", f, first, got.LEO, got.HighWatermark)
	}
	c.Resume(f)
	has(t, c.Node(f), off, "p4")
}

// TestRestartOfARunningNodeFails: Restart needs the node down.
func TestRestartOfARunningNodeFails(t *testing.T) {
	ft := &fatalT{TB: t}
	c := NewCluster(t, 1)
	c.t = ft
	func() {
		defer func() { _ = recover() }()
		c.Restart("n1")
	}()
	if !strings.Contains(ft.msg, "while it runs") {
		t.Fatalf("Restart of a running node: %q", ft.msg)
	}
}

// fatalT records Fatalf instead of ending the test.
type fatalT struct {
	TB
	msg string
}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(errors.New(f.msg))
}
