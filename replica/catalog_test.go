package replica

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// newCatalogCluster is newKeyCluster with every node supporting the level
// of named logs, the level raised and a leader elected.
func newCatalogCluster(t *testing.T, change func(*Config), ids ...string) *keyCluster {
	c := &keyCluster{t: t, now: t0, ids: ids, nodes: map[string]*Replica{}, store: map[string]*storage.Memory{},
		cfg: map[string]Config{}, down: map[string]bool{}, acks: map[string][]Ack{}}
	for i, id := range ids {
		cfg := testConfig(id, ids...)
		cfg.Rand = rand.New(rand.NewSource(int64(i)))
		cfg.SupportedFeatureLevel = protocol.FeatureLevelNamedLogs
		if change != nil {
			change(&cfg)
		}
		c.cfg[id] = cfg
		c.store[id] = storage.NewMemory()
		c.start(id)
	}
	c.elect(ids[0])
	c.advance(3 * c.cfg[ids[0]].FetchTimeout) // R68: the level rises once every voter fetched
	return c
}

func logKey(p, seq uint64) protocol.Key { return protocol.Key{Producer: p, Seq: seq, Low: seq} }

// catalogOf returns r's catalog as "name@offset=spec" strings.
func catalogOf(r *Replica) []string {
	var out []string
	for _, l := range r.Logs() {
		out = append(out, fmt.Sprintf("%s@%d=%s", l.Name, l.Offset, l.Spec))
	}
	return out
}

// TestLogChangesAreDecidedOnTheNewestTable (R80): the leader decides a
// create or a delete against its newest key table, uncommitted entries
// included, so two creates of one name never both commit: two in one
// round on the leader, and two forwarded by two followers in one round,
// get one success and one ErrLogExists (forwarded: AppendLogExists). A
// delete of a name not held gets ErrUnknownLog; a producer's retry of a
// create that committed gets the original's offset (R63 first), not
// ErrLogExists. Every node ends with the same catalog, each log at the
// offset of the entry that created it. Teeth:
// replog_bug_catalog_committed_only (the leader checks only the
// committed catalog: both creates commit).
func TestLogChangesAreDecidedOnTheNewestTable(t *testing.T) {
	c := newCatalogCluster(t, nil, "a", "b", "c")
	if l := c.nodes["a"].Status().FeatureLevel; l < protocol.FeatureLevelNamedLogs {
		t.Fatalf("the level is %d, want %d", l, protocol.FeatureLevelNamedLogs)
	}
	a := c.nodes["a"]
	a.ProposeLogChange(1, logKey(1, 1), "orders", []byte("o1"))
	a.ProposeLogChange(2, logKey(1, 2), "orders", []byte("o2"))
	c.nodes["b"].ProposeLogChange(3, logKey(2, 1), "payments", []byte("pb"))
	c.nodes["c"].ProposeLogChange(4, logKey(3, 1), "payments", []byte("pc"))
	c.run()
	if ack := c.ack("a", 1); ack.Err != nil {
		t.Fatalf("first create: %+v", ack)
	}
	if ack := c.ack("a", 2); !errors.Is(ack.Err, ErrLogExists) {
		t.Fatalf("second create of the name in the same round: %+v, want ErrLogExists", ack)
	}
	b, cc := c.ack("b", 3), c.ack("c", 4)
	winner, spec := b, "pb"
	if b.Err != nil {
		winner, spec = cc, "pc"
	}
	if winner.Err != nil || (b.Err == nil) == (cc.Err == nil) {
		t.Fatalf("two forwarded creates of one name: %+v and %+v, want one committed and one ErrLogExists", b, cc)
	}
	if loser := map[bool]Ack{true: cc, false: b}[b.Err == nil]; !errors.Is(loser.Err, ErrLogExists) {
		t.Fatalf("the forwarded create that lost: %+v, want ErrLogExists", loser)
	}
	c.nodes["c"].ProposeLogChange(5, logKey(3, 2), "nope", nil)
	c.run()
	if ack := c.ack("c", 5); !errors.Is(ack.Err, ErrUnknownLog) {
		t.Fatalf("delete of a log never created: %+v, want ErrUnknownLog", ack)
	}
	retry := logKey(1, 1)
	a.ProposeLogChange(6, retry, "orders", []byte("o1"))
	c.run()
	if ack := c.ack("a", 6); ack.Err != nil || ack.FirstOffset != c.ack("a", 1).FirstOffset {
		t.Fatalf("a retry of the committed create: %+v, want the original's offset %d", ack, c.ack("a", 1).FirstOffset)
	}
	c.nodes["b"].ProposeLogChange(7, logKey(2, 2), "orders", nil)
	c.run()
	if ack := c.ack("b", 7); ack.Err != nil {
		t.Fatalf("forwarded delete: %+v", ack)
	}
	c.advance(time.Second) // followers learn the HW
	want := []string{fmt.Sprintf("payments@%d=%s", winner.FirstOffset, spec)}
	for _, id := range c.ids {
		if got := catalogOf(c.nodes[id]); !slices.Equal(got, want) {
			t.Fatalf("%s: catalog %v, want %v", id, got, want)
		}
	}
	// The name is free again: a new incarnation.
	a.ProposeLogChange(8, logKey(1, 3), "orders", []byte("o3"))
	c.run()
	c.advance(time.Second)
	if ack := c.ack("a", 8); ack.Err != nil || !slices.Contains(catalogOf(c.nodes["c"]), fmt.Sprintf("orders@%d=o3", ack.FirstOffset)) {
		t.Fatalf("create after the delete: %+v, catalog at c %v", ack, catalogOf(c.nodes["c"]))
	}
}

// TestLogChangeRefusals (R80): below the level of named logs (a hold at
// 8) a change is refused on the leader and on a follower, and a forwarded
// one reaching the leader is answered AppendFeatureLevelTooLow; a bad
// name, a spec above MaxLogSpecLength and a key without a producer are
// ErrTooLarge; nothing is appended for any of them.
func TestLogChangeRefusals(t *testing.T) {
	c := newCatalogCluster(t, func(cfg *Config) { cfg.MaxFeatureLevel = protocol.FeatureLevelNamedLogs - 1 }, "a", "b")
	leo := c.nodes["a"].log.LEO()
	c.nodes["a"].ProposeLogChange(1, logKey(1, 1), "orders", []byte("s"))
	c.nodes["b"].ProposeLogChange(2, logKey(2, 1), "orders", []byte("s"))
	c.run()
	for _, w := range []struct {
		node string
		id   uint64
	}{{"a", 1}, {"b", 2}} {
		if ack := c.ack(w.node, w.id); !errors.Is(ack.Err, ErrFeatureLevelTooLow) {
			t.Fatalf("%s: change at level %d: %+v, want ErrFeatureLevelTooLow", w.node, c.nodes[w.node].level, ack)
		}
	}
	rec := protocol.EncodeStateRecords(nil, protocol.StateRecord{Kind: protocol.StateLog, Name: "orders", Data: []byte("s")})
	h := protocol.EncodeKeyHeader(protocol.KeyHeader{Key: logKey(2, 2), N: 1})
	c.nodes["a"].Step(protocol.Message{From: "b", To: "a", Body: &protocol.AppendRequest{RequestID: 99, Epoch: c.nodes["a"].epoch,
		Type: protocol.EntryState, Records: [][]byte{rec, h}}})
	rd := c.nodes["a"].Ready()
	resp := bodiesTo[*protocol.AppendResponse](rd.Messages, "b")
	if len(resp) != 1 || resp[0].Error != protocol.AppendFeatureLevelTooLow {
		t.Fatalf("forwarded change below the level: %+v, want AppendFeatureLevelTooLow", resp)
	}
	if err := appendErrorAsError(protocol.AppendFeatureLevelTooLow, "a"); !errors.Is(err, ErrFeatureLevelTooLow) {
		t.Fatalf("the code reaches the forwarder as %v", err)
	}
	for i, bad := range []struct {
		key  protocol.Key
		name string
		spec []byte
	}{
		{logKey(1, 5), "Orders", []byte("s")},
		{logKey(1, 6), ".hidden", []byte("s")},
		{logKey(1, 7), "", nil},
		{logKey(1, 8), "orders", make([]byte, protocol.MaxLogSpecLength+1)},
		{protocol.Key{ID: "x"}, "orders", []byte("s")},
	} {
		id := uint64(10 + i)
		c.nodes["a"].ProposeLogChange(id, bad.key, bad.name, bad.spec)
		c.run()
		if ack := c.ack("a", id); !errors.Is(ack.Err, ErrTooLarge) {
			t.Fatalf("change %q with %d bytes of spec, key %+v: %+v, want ErrTooLarge", bad.name, len(bad.spec), bad.key, ack)
		}
	}
	if got := c.nodes["a"].log.LEO(); got != leo {
		t.Fatalf("refused changes appended: LEO %d, was %d", got, leo)
	}
}

// TestCatalogFollowsTruncation (R80): a create above the readable HW is in
// the table (the leader would decide against it) but not in Logs; a
// truncation undoes it, and Logs never changed; once a create is
// committed, Logs holds it at its entry's offset.
func TestCatalogFollowsTruncation(t *testing.T) {
	store := storage.NewMemory()
	r := newTestReplica(t, testConfig("f", "l", "f"), store)
	change := func(off, seq uint64, name, spec string) protocol.Entry {
		rec := protocol.EncodeStateRecords(nil, protocol.StateRecord{Kind: protocol.StateLog, Name: name, Data: []byte(spec)})
		h := protocol.EncodeKeyHeader(protocol.KeyHeader{Key: logKey(1, seq), N: 1})
		return protocol.Entry{Offset: off, Epoch: 1, Type: protocol.EntryState, Data: protocol.KeyedData(h, rec)}
	}
	r.appendEntries([]protocol.Entry{
		{Offset: 0, Epoch: 1, Type: protocol.EntryControl},
		change(1, 1, "a", "sa"),
		change(2, 2, "b", "sb"),
		change(3, 3, "a", ""),
	})
	r.hw = 2
	settle(t, r, store)
	if got := catalogOf(r); !slices.Equal(got, []string{"a@1=sa"}) || r.LogsVersion() == 0 {
		t.Fatalf("catalog below the HW: %v (version %d), want a@1 only", got, r.LogsVersion())
	}
	if _, ok := r.keys.logs["b"]; !ok || r.keys.logs["a"] != nil {
		t.Fatalf("the table holds %v: want b, and a deleted (uncommitted entries included)", r.keys.logs)
	}
	v := r.LogsVersion()
	r.truncate(2)
	settle(t, r, store)
	if got := catalogOf(r); !slices.Equal(got, []string{"a@1=sa"}) || r.LogsVersion() != v {
		t.Fatalf("catalog after the truncation: %v (version %d, was %d)", got, r.LogsVersion(), v)
	}
	if l := r.keys.logs["a"]; l == nil || l.created != 1 || len(r.keys.logs) != 1 {
		t.Fatalf("the table after the truncation: %v, want a@1 only", r.keys.logs)
	}
	r.appendEntries([]protocol.Entry{change(2, 4, "c", "sc")})
	r.hw = 3
	settle(t, r, store)
	if got := catalogOf(r); !slices.Equal(got, []string{"a@1=sa", "c@2=sc"}) || r.LogsVersion() == v {
		t.Fatalf("catalog after a create committed: %v (version %d)", got, r.LogsVersion())
	}
}

// retainedCatalog builds a cluster of a and b whose log start is above
// the creates of two logs: x live, y deleted; the leader copied x above
// the log start (R81), and the copy is above it. It returns the cluster and x's creating offset.
func retainedCatalog(t *testing.T) (*keyCluster, uint64) {
	c := newCatalogCluster(t, nil, "a", "b")
	a := c.nodes["a"]
	a.ProposeLogChange(1, logKey(1, 1), "x", []byte("sx"))
	a.ProposeLogChange(2, logKey(1, 2), "y", []byte("sy"))
	c.run()
	a.ProposeLogChange(3, logKey(1, 3), "y", nil)
	for i := range 20 {
		a.Propose(uint64(100+i), rec(fmt.Sprint(i)))
	}
	c.run()
	x := c.ack("a", 1).FirstOffset
	leo := a.log.LEO()
	start, _ := a.DeleteBefore(leo)
	c.run()
	if start > x {
		t.Fatalf("the log start %d passed x's create at %d before its copy was committed", start, x)
	}
	c.advance(time.Second)
	start, _ = a.DeleteBefore(leo - 5) // below the copy: R82's test needs it above the log start
	c.run()
	c.advance(time.Second)
	if start <= c.ack("a", 3).FirstOffset {
		t.Fatalf("the log start %d did not pass the creates and the delete once the copy committed", start)
	}
	if l := a.keys.logs["x"]; l == nil || l.created != x || l.at < start {
		t.Fatalf("x in the leader's table: %+v, want created at %d, recorded at or above %d", l, x, start)
	}
	return c, x
}

// TestRetentionKeepsLiveLogs (R81): the leader never moves its log start
// past a live log's newest record; it copies the log (its spec, and the
// offset that created it: its incarnation) above, and the next deletion
// moves on. A deleted log is not copied. A node restarted after the
// deletion, replaying from the log start or from its key checkpoint,
// holds the same catalog.
func TestRetentionKeepsLiveLogs(t *testing.T) {
	for _, withCkpt := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkpoint %v", withCkpt), func(t *testing.T) {
			c, x := retainedCatalog(t)
			want := []string{fmt.Sprintf("x@%d=sx", x)}
			if got := catalogOf(c.nodes["a"]); !slices.Equal(got, want) {
				t.Fatalf("leader's catalog %v, want %v", got, want)
			}
			if withCkpt {
				b := c.nodes["b"]
				cp := protocol.KeyCheckpoint{Offset: b.keys.applied, Epoch: b.log.epochAt(b.keys.applied - 1), Data: b.keys.encode()}
				if err := c.store["b"].SaveKeyCheckpoint(cp); err != nil {
					t.Fatal(err)
				}
			}
			c.restart("b")
			if withCkpt {
				if _, ok := c.nodes["b"].KeyCheckpointRestored(); !ok {
					t.Fatal("the key checkpoint was not restored")
				}
			}
			c.advance(time.Second)
			if got := catalogOf(c.nodes["b"]); !slices.Equal(got, want) {
				t.Fatalf("b after a restart: catalog %v, want %v", got, want)
			}
		})
	}
}

// TestCatalogUnknownUntilCovered (R82): a replica whose log lost a prefix
// rebuilds its table from the log start, where a live log may be recorded
// only by a copy above its readable HW: the catalog is not known (version
// 0, Logs nil) until a leader's HW that covers an entry of its epoch is
// reached, and then it holds the copied log. Teeth:
// replog_bug_catalog_trusts_rebuild (the rebuilt table is taken as
// whole: the restarted node publishes a catalog without x).
func TestCatalogUnknownUntilCovered(t *testing.T) {
	c, x := retainedCatalog(t)
	s := c.store["b"]
	es, err := s.Entries(s.LogStart(), int(s.LEO()-s.LogStart()), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	cp := uint64(0)
	for _, e := range es {
		if e.Type == protocol.EntryState && len(e.Data) > 0 && e.Data[0] == 0 {
			cp = e.Offset // a copy: no key header
		}
	}
	if cp == 0 || cp <= s.LogStart() {
		t.Fatalf("b's log (start %d) holds no copy above its log start: %s", s.LogStart(), fmtEntries(es))
	}
	// b's HW checkpoint stops just below the copy: after a restart, its
	// readable HW does not cover it.
	applyWrites(t, s, []protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: cp}})
	c.down["a"] = true
	c.restart("b")
	c.run()
	b := c.nodes["b"]
	if b.ReadableHW() != cp || b.keys.applied < cp {
		t.Fatalf("b restarted with readable HW %d (applied %d), want %d", b.ReadableHW(), b.keys.applied, cp)
	}
	if b.LogsVersion() != 0 || b.Logs() != nil {
		t.Fatalf("b published catalog %v (version %d) before any leader told it the table covers every live log", catalogOf(b), b.LogsVersion())
	}
	c.down["a"] = false
	c.advance(3 * time.Second)
	want := []string{fmt.Sprintf("x@%d=sx", x)}
	if got := catalogOf(b); b.LogsVersion() == 0 || !slices.Equal(got, want) {
		t.Fatalf("b once the leader answered: catalog %v (version %d), want %v", got, b.LogsVersion(), want)
	}
}

// TestCatalogLearnedFromIdleLeader (R82's liveness): a follower restarted
// with its log start above 0 follows a leader elected on a fully
// committed log, which appends nothing of its epoch, and nobody writes:
// the follower forwards one barrier of its own (again once it is lost),
// whose commit gives it the bound, and its catalog becomes known; no Ack
// of it reaches a caller; once known, it sends none under the next leader. Teeth: replog_bug_catalog_no_barrier (b
// never learns the catalog).
func TestCatalogLearnedFromIdleLeader(t *testing.T) {
	c, x := retainedCatalog(t)
	c.advance(time.Second) // every HW and HW checkpoint at the log end
	a := c.nodes["a"]
	c.restart("b")
	b := c.nodes["b"]
	if b.log.logStart == 0 || b.LogsVersion() != 0 {
		t.Fatalf("b restarted with log start %d, catalog version %d: want a lost prefix and an unknown catalog", b.log.logStart, b.LogsVersion())
	}
	leo := a.log.LEO()
	if a.hw != leo {
		t.Fatalf("a's HW %d below its log end %d: the election would append an entry of its epoch", a.hw, leo)
	}
	epoch := a.epoch
	dropped := 0
	c.drop = func(m protocol.Message) bool {
		if _, ok := m.Body.(*protocol.AppendRequest); ok && m.From == "b" && dropped == 0 {
			dropped++ // the first barrier is lost: b must send another (R96 gives it a deadline)
			return true
		}
		return false
	}
	c.elect("a")
	c.advance(10 * time.Second)
	c.drop = nil
	if dropped != 1 {
		t.Fatalf("b sent no barrier to drop")
	}
	want := []string{fmt.Sprintf("x@%d=sx", x)}
	if got := catalogOf(b); b.LogsVersion() == 0 || !slices.Equal(got, want) {
		t.Fatalf("b under an idle leader: catalog %v (version %d), want %v", got, b.LogsVersion(), want)
	}
	es, err := c.store["a"].Entries(leo, int(a.log.LEO()-leo), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Type != protocol.EntryControl || es[0].Epoch != epoch+1 || a.hw != a.log.LEO() {
		t.Fatalf("a appended %s (HW %d) in its idle leadership, want one committed barrier of epoch %d", fmtEntries(es), a.hw, epoch+1)
	}
	if len(c.acks["b"]) != 0 {
		t.Fatalf("b's caller got Acks %+v for a proposal it never made", c.acks["b"])
	}
	// Known, b asks for nothing more under the next leader either.
	c.elect("a")
	c.advance(3 * time.Second)
	if got := a.log.LEO(); got != leo+1 {
		t.Fatalf("a's log end %d after another idle leadership, want %d: a follower that knows its catalog sent a barrier", got, leo+1)
	}
}

// TestKeyCheckpointOfTheReleaseBeforeLogs: a version-1 checkpoint (no
// logs section, undo records without a log) still restores.
func TestKeyCheckpointOfTheReleaseBeforeLogs(t *testing.T) {
	tb := newKeyTable(0)
	tb.applied = 7
	tb.cursors["c"] = &cursorState{next: 3, at: 5}
	v2 := tb.encode()
	v1 := append([]byte{keyCheckpointVersionNoLogs}, v2[1:len(v2)-2]...) // without the undo floor (0) and the empty logs section
	got, err := decodeKeyTable(v1)
	if err != nil {
		t.Fatal(err)
	}
	sameTable(t, "version 1", &got, &tb, 0)
}
