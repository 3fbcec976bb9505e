package replog

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// TestLogMuxRoutesByName (R84): a message goes to the log it names and no
// other; one for a log not open here is dropped and counted; a lost peer
// goes to every log; a leader claim to the default log only; a joined
// member to the logs it replicates.
func TestLogMuxRoutesByName(t *testing.T) {
	m := newLogMux(nil, nil, hclog.NewNullLogger(), nil)
	defer m.close()
	_, def := m.add("", nil)
	_, a := m.add("a", []string{"n1", "n2"})
	_, b := m.add("b", []string{"n1", "n3"})
	m.route(protocol.Message{From: "n2", To: "n1", Log: "a", Body: &protocol.VoteRequest{}})
	m.route(protocol.Message{From: "n2", To: "n1", Body: &protocol.VoteRequest{}})
	m.route(protocol.Message{From: "n2", To: "n1", Log: "zz", Body: &protocol.VoteRequest{}})
	if len(a.recv) != 1 || (<-a.recv).Log != "a" {
		t.Fatalf("log a got %d messages, want its one", len(a.recv))
	}
	if len(def.recv) != 1 || len(b.recv) != 0 {
		t.Fatalf("default log got %d messages (want 1), b %d (want 0)", len(def.recv), len(b.recv))
	}
	if m.unknown.Load() != 1 {
		t.Fatalf("dropped for an unknown log: %d, want 1", m.unknown.Load())
	}
	m.peerDown("n2")
	for _, in := range []*inbox{def, a, b} {
		if len(in.down) != 1 {
			t.Fatalf("log %q: %d lost peers, want 1", in.name, len(in.down))
		}
	}
	m.hint(membership.Hint{Kind: membership.LeaderClaim, Node: "n2", Epoch: 3})
	m.hint(membership.Hint{Kind: membership.MemberJoined, Node: "n3"})
	m.hint(membership.Hint{Kind: membership.NodeFailed, Node: "n2"})
	if got := []int{len(def.hints), len(a.hints), len(b.hints)}; got[0] != 3 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("hints (default, a, b) = %v, want [3 1 2]", got)
	}
	// Another incarnation of a log open here is another log.
	_, inc := m.add(wireLogName("orders", 17), []string{"n1"})
	m.route(protocol.Message{From: "n2", To: "n1", Log: wireLogName("orders", 18), Body: &protocol.VoteRequest{}})
	if len(inc.recv) != 0 || m.unknown.Load() != 2 {
		t.Fatalf("a message of another incarnation delivered (%d) or not counted (%d)", len(inc.recv), m.unknown.Load())
	}
	m.remove(a)
	m.route(protocol.Message{From: "n2", To: "n1", Log: "a", Body: &protocol.VoteRequest{}})
	if len(a.recv) != 0 || m.unknown.Load() != 3 {
		t.Fatalf("a removed log still gets messages (%d), dropped %d", len(a.recv), m.unknown.Load())
	}
}

// TestLogMuxContactReports (R99, R100): contact reports reach every log
// and none is lost, however many come before its loop takes them (a
// quiesced follower waits for them); a log keeps each peer once per kind,
// so what waits is bounded by the peers, and one wake stands for all.
func TestLogMuxContactReports(t *testing.T) {
	m := newLogMux(nil, nil, hclog.NewNullLogger(), nil)
	defer m.close()
	_, a := m.add("a", []string{"n1", "n2"})
	_, b := m.add("b", []string{"n1", "n3"})
	// Far more reports than any channel bound the inbox had, from 3 peers.
	for i := range 3 * inboxSize {
		peer := []string{"n2", "n3", "n4"}[i%3]
		m.report(reportSilent, peer)
		if i%2 == 0 {
			m.report(reportResync, peer)
		}
	}
	m.report(reportResync, "n5")
	if got := m.full.Load(); got != 0 {
		t.Fatalf("%d reports dropped, want none", got)
	}
	for _, in := range []*inbox{a, b} {
		if len(in.reports.wake) != 1 {
			t.Fatalf("log %q: no wake pending after its reports", in.name)
		}
		<-in.reports.wake
		silent, resync := in.reports.take()
		if want := []string{"n2", "n3", "n4"}; !slices.Equal(silent, want) {
			t.Fatalf("log %q: silent peers %v, want %v", in.name, silent, want)
		}
		if want := []string{"n2", "n4", "n3", "n5"}; !slices.Equal(resync, want) {
			t.Fatalf("log %q: resyncs %v, want %v", in.name, resync, want)
		}
		if s, r := in.reports.take(); s != nil || r != nil {
			t.Fatalf("log %q: reports taken twice: %v %v", in.name, s, r)
		}
	}
	// A report after the take wakes the loop again.
	m.report(reportSilent, "n2")
	if s, _ := a.reports.take(); len(a.reports.wake) != 1 || !slices.Equal(s, []string{"n2"}) {
		t.Fatalf("a report after a take: wake %d, silent %v", len(a.reports.wake), s)
	}
}

// TestRemoveStale (R83): a node removes the directories of logs the
// catalog no longer holds (deleted, or an older incarnation, or not this
// node's), but never one created at or above the catalog's HW: a node
// whose catalog is behind must not take a newer log for a deleted one.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	n := &Node{opts: Options{Dir: dir, NodeID: "n1"}.withDefaults(), logger: hclog.NewNullLogger()}
	n.opts.NoSync = true
	defer func() {
		if n.journal != nil {
			_ = n.journal.Close()
		}
	}()
	c := &catalog{hw: 10, logs: map[string]catalogEntry{
		"keep":  {name: "keep", incarnation: 4, spec: logSpec{Replicas: []string{"n1", "n2"}}},
		"other": {name: "other", incarnation: 5, spec: logSpec{Replicas: []string{"n2", "n3"}}},
	}}
	logs := filepath.Join(dir, logsDirName)
	for _, d := range []string{"keep-4", "keep-2", "gone-3", "new-12", "other-5"} {
		if err := os.MkdirAll(filepath.Join(logs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.removeStale(c)
	for d, want := range map[string]bool{"keep-4": true, "keep-2": false, "gone-3": false, "new-12": true, "other-5": false} {
		_, err := os.Stat(filepath.Join(logs, d))
		if got := err == nil; got != want {
			t.Errorf("%s kept: %v, want %v", d, got, want)
		}
	}
}

// TestRemoveStaleKeepsUndecoded (R83): a log whose spec does not decode
// here (a newer release's, say) is still in the catalog: its directory
// stays; an older incarnation of its name goes.
func TestRemoveStaleKeepsUndecoded(t *testing.T) {
	dir := t.TempDir()
	n := &Node{opts: Options{Dir: dir, NodeID: "n1"}.withDefaults(), logger: hclog.NewNullLogger()}
	n.opts.NoSync = true
	defer func() {
		if n.journal != nil {
			_ = n.journal.Close()
		}
	}()
	good := logSpec{Replicas: []string{"n1", "n2"}}.encode()
	c, err := newCatalog([]replica.LogRecord{
		{Name: "keep", Spec: good, Offset: 4},
		{Name: "bad", Spec: []byte(`{"replicas": 7}`), Offset: 6},
	}, 10, nil)
	if err == nil {
		t.Fatal("newCatalog took a spec that does not decode")
	}
	logs := filepath.Join(dir, logsDirName)
	for _, d := range []string{"keep-4", "bad-6", "bad-2"} {
		if err := os.MkdirAll(filepath.Join(logs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.removeStale(c)
	for d, want := range map[string]bool{"keep-4": true, "bad-6": true, "bad-2": false} {
		_, err := os.Stat(filepath.Join(logs, d))
		if got := err == nil; got != want {
			t.Errorf("%s kept: %v, want %v", d, got, want)
		}
	}
}

// TestWireLogName: the longest name with the largest incarnation is a
// name the wire carries, and no two (name, incarnation) pairs share one.
func TestWireLogName(t *testing.T) {
	long := strings.Repeat("a", MaxLogNameLength)
	if err := protocol.ValidLogName(wireLogName(long, math.MaxUint64)); err != nil {
		t.Fatalf("the longest wire name: %v", err)
	}
	if err := checkLogName(long + "a"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a name over MaxLogNameLength: %v", err)
	}
	seen := map[string]bool{}
	for _, name := range []string{"a", "a.1", "a.b", "b"} {
		for _, inc := range []uint64{1, 36, 37, 1 << 40} {
			w := wireLogName(name, inc)
			if seen[w] {
				t.Fatalf("%q %d: wire name %q taken", name, inc, w)
			}
			seen[w] = true
		}
	}
}

// TestLogMuxBacklog: an inbox's channel holds inboxChan messages; the
// ones after it wait in the backlog and reach the log in the order they
// came, up to inboxSize in all, then are dropped and counted; once the
// log has read them the feed goroutine ends and the backlog's room goes
// (goleak in TestMain checks nothing is left running).
func TestLogMuxBacklog(t *testing.T) {
	m := newLogMux(nil, nil, hclog.NewNullLogger(), nil)
	defer m.close()
	_, in := m.add("a", []string{"n1"})
	for i := range inboxSize + 10 {
		m.route(protocol.Message{From: "n2", To: "n1", Log: "a", Body: &protocol.FetchRequest{FetchOffset: uint64(i)}})
	}
	if got := m.full.Load(); got != 10 {
		t.Fatalf("dropped %d messages, want the 10 beyond inboxSize (%d)", got, inboxSize)
	}
	for i := range inboxSize {
		msg := <-in.recv
		if got := msg.Body.(*protocol.FetchRequest).FetchOffset; got != uint64(i) {
			t.Fatalf("message %d read as the %d-th: the backlog reordered them", got, i)
		}
	}
	for {
		in.mu.Lock()
		feeding, backlog := in.feeding, in.backlog
		in.mu.Unlock()
		if !feeding {
			if backlog != nil {
				t.Fatalf("the drained inbox keeps a backlog of capacity %d", cap(backlog))
			}
			break
		}
		runtime.Gosched()
	}
	// Drained, the channel takes the next message directly again.
	m.route(protocol.Message{From: "n2", To: "n1", Log: "a", Body: &protocol.FetchRequest{FetchOffset: 7}})
	if len(in.recv) != 1 {
		t.Fatalf("after the backlog drained, the channel holds %d messages, want 1", len(in.recv))
	}
	// A feed goroutine blocked on a log that stopped reading ends with
	// the inbox's removal.
	for range inboxChan + 5 {
		m.route(protocol.Message{From: "n2", To: "n1", Log: "a", Body: &protocol.FetchRequest{}})
	}
	m.remove(in)
}
