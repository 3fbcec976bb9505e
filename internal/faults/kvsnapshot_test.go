package faults

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// kvWriter writes keys w<id>-0..w<id>-<keys-1> (its own: each key has one
// writer, one write at a time, as CheckKV wants) through random running
// nodes until stop: puts, deletes, creates and updates at the revision it
// last saw acknowledged (refused when an unknown write applied meanwhile,
// which the refusal's current revision then tells), values of about
// size bytes, each unique.
func kvWriter(ctx context.Context, c *Cluster, h *KVHistory, id, keys, size int, seed int64, stop <-chan struct{}) {
	rng := rand.New(rand.NewSource(seed + int64(id)*7919))
	known := map[string]uint64{} // the key's revision as last acknowledged; 0: absent
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		var up []*Node
		for _, n := range c.Nodes {
			if n.Running() && !n.Paused() && !n.Wiping() {
				up = append(up, n)
			}
		}
		if len(up) == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		n := up[rng.Intn(len(up))]
		key := fmt.Sprintf("w%d-%d", id, rng.Intn(keys))
		value := fmt.Sprintf("w%d.%d|", id, seq)
		value += strings.Repeat(string(rune('a'+seq%26)), max(0, size-len(value)))
		op := KVOp{Key: key, Value: value}
		switch r := rng.Intn(20); {
		case r < 9:
			op.Kind = "put"
		case r < 12:
			op.Kind, op.Value = "delete", ""
		case r < 14:
			op.Kind = "create"
		default:
			op.Kind, op.Expected = "update", known[key]
		}
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		op = c.KVWrite(octx, n, op)
		cancel()
		h.Add(op)
		switch {
		case op.Outcome == OK && op.Kind == "delete":
			known[key] = 0
		case op.Outcome == OK:
			known[key] = op.Revision
		case op.Outcome == Refused && op.Kind == "update":
			known[key] = op.Current
		case op.Outcome == Failed:
			time.Sleep(20 * time.Millisecond) // no leader, a KV reopening
		}
	}
}

// waitShippable waits until every node's log start has moved to minStart
// or beyond (retention deleted a real prefix, not only the bootstrap's
// first segment) and
// the leader keeps a snapshot (the KV's) at or above its log start, at a
// feature level that ships snapshots (9): a node wiped now holds nothing
// the leader has, and gets that snapshot.
func waitShippable(ctx context.Context, c *Cluster, minStart uint64, timeout time.Duration) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	starts := map[string]uint64{}
	why := ""
	for {
		leader, lst, ok := c.LeaderStatus(ctx)
		for _, n := range c.Nodes {
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			st, err := c.Status(sctx, n)
			scancel()
			if err == nil {
				starts[n.ID] = st.LogStart
			}
		}
		moved := len(starts) == len(c.Nodes)
		for _, s := range starts {
			moved = moved && s >= minStart
		}
		switch {
		case !moved:
			why = fmt.Sprintf("not every log start at %d or above", minStart)
		case !ok:
			why = "no leader"
		case lst.FeatureLevel < 9:
			why = fmt.Sprintf("feature level %d", lst.FeatureLevel)
		default:
			kst, err := c.KVState(ctx, leader, false)
			switch {
			case err != nil:
				why = err.Error()
			case len(kst.Kept) == 0 || kst.Kept[0].Offset < lst.LogStart:
				why = fmt.Sprintf("leader %s keeps snapshots %v, log start %d", leader.ID, kst.Kept, lst.LogStart)
			default:
				return starts, nil
			}
		}
		select {
		case <-ctx.Done():
			return starts, fmt.Errorf("log starts %v: %s after %v", starts, why, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitKVAgree waits until every node serves its KV state (after a
// barrier) and all are equal, and returns them.
func waitKVAgree(ctx context.Context, c *Cluster, timeout time.Duration) (map[string]KVState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		states := map[string]KVState{}
		last = nil
		for _, n := range c.Nodes {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := c.KVState(sctx, n, true)
			scancel()
			if err != nil {
				last = err
				break
			}
			states[n.ID] = st
		}
		if last == nil {
			ref := states[c.Nodes[0].ID]
			for _, n := range c.Nodes[1:] {
				if err := DiffKV(ref, states[n.ID]); err != nil {
					last = fmt.Errorf("%s vs %s: %w", c.Nodes[0].ID, n.ID, err)
					break
				}
			}
			if last == nil {
				return states, nil
			}
		}
		select {
		case <-ctx.Done():
			return states, last
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// installs counts the snapshots n's logs say it received and installed
// (the root logs each at Info), in every incarnation so far.
func installs(t *testing.T, n *Node) int {
	t.Helper()
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		t.Fatalf("%s's log: %v", n.ID, err)
	}
	return strings.Count(string(b), "snapshot received and installed")
}

// pickFollower returns a running voter that does not lead.
func pickFollower(ctx context.Context, c *Cluster) (*Node, *Node) {
	leader, _ := waitLeader(ctx, c)
	for _, n := range c.Voters() {
		if n != leader && n.Running() {
			return n, leader
		}
	}
	return nil, leader
}

// kvNodeArgs are the node flags of the KV snapshot runs: small segments
// and retention by size, bounded by each node's newest snapshot (the
// KV's, every snapEvery operations).
func kvNodeArgs(segment, retention string, snapEvery int) []string {
	return []string{"-segment-bytes", segment, "-retention-bytes", retention,
		"-retain-until-snapshot", "-kv-snapshot-every", fmt.Sprint(snapEvery)}
}

// TestWipedNodeRestoresKVFromSnapshot: 3 voters with retention bounded by
// the KV's snapshots (R87), record appenders and readers as in TestFaults,
// and KV writers (puts, deletes, creates, updates at a revision). Once the
// log start has moved past 0 on every node, a follower is wiped
// (SIGKILL, data directory deleted, started again empty): it holds none
// of the log the leader still has, so it gets the leader's snapshot
// shipped (R92) before it resets to the leader's log start, its KV
// stops (the log start passed it) and the node opens it again from that
// snapshot; the writers go on all along. Then every node's KV state
// (every key, value and revision, after a barrier) must be the same,
// and the state the acknowledged writes leave (CheckKV: no acknowledged
// KV write lost, nothing no one wrote); the records' checker finds no
// anomaly either. Positive controls: the wiped node came back with a new
// directory and an empty log start... and its logs say it installed a
// received snapshot; its KV was restored from a snapshot above 0.
func TestWipedNodeRestoresKVFromSnapshot(t *testing.T) {
	o := testRunOpts(t)
	o.nodeArgs = append(o.nodeArgs, kvNodeArgs("128KiB", "512KiB", 100)...)
	o.kvEntries = true
	o.cfg.Appenders, o.cfg.Readers = 2, 1
	o.cfg.Duration = 3 * time.Minute // an upper bound: the script ends the run
	o.cfg.ConvergeTimeout = 60 * time.Second
	seed := o.cfg.Seed
	kh := &KVHistory{}
	var wiped *Node
	var wipedDir, oldDir string
	var before int
	var states map[string]KVState
	var kvErr error
	o.cfg.Script = func(ctx context.Context, nm *Nemesis) {
		c := nm.c
		stop := make(chan struct{})
		writersStop := stop
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				kvWriter(ctx, c, kh, i, 16, 200, seed, writersStop)
			}()
		}
		defer func() {
			if stop != nil {
				close(stop)
				wg.Wait()
			}
		}()
		starts, err := waitShippable(ctx, c, 2000, 90*time.Second)
		if err != nil {
			t.Errorf("retention did not move the log start past 0 on every node: %v", err)
			return
		}
		t.Logf("log starts before the wipe: %v", starts)
		target, leader := pickFollower(ctx, c)
		if target == nil {
			t.Errorf("no follower to wipe (leader %v)", leader)
			return
		}
		if st, err := c.Status(ctx, target); err == nil {
			oldDir = st.DirectoryID
		}
		before = installs(t, target)
		if err := c.Wipe(target); err != nil {
			t.Errorf("wiping %s: %v", target.ID, err)
			return
		}
		wiped = target
		nm.event("wipe-voter", false, "data directory deleted, restarted empty", target)
		if err := c.WaitReady(ctx, target); err != nil {
			t.Errorf("%s after its wipe: %v", target.ID, err)
			return
		}
		if st, err := c.Status(ctx, target); err == nil {
			wipedDir = st.DirectoryID
		}
		// Its KV runs again once restored from the shipped snapshot; the
		// writers go on meanwhile and a while after.
		deadline := time.Now().Add(60 * time.Second)
		for {
			st, err := c.KVState(ctx, target, false)
			if err == nil && st.RestoredAt > 0 {
				t.Logf("%s: KV restored at %d (opens %d), now at %d with %d keys", target.ID, st.RestoredAt, st.Opens, st.Next, len(st.Entries))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Errorf("%s's KV was not restored from a snapshot within 60s: %+v %v", target.ID, st, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		nm.sleep(ctx, 3*time.Second)
		// The KV writers stop; the record appenders go on (their entries
		// leave the KV's state alone).
		close(stop)
		wg.Wait()
		stop = nil
		states, kvErr = waitKVAgree(ctx, c, 60*time.Second)
	}
	rep := faultRun(t, o)
	checkRun(t, rep)
	if wiped == nil {
		return
	}
	if kvErr != nil {
		t.Fatalf("the nodes' KV states do not agree: %v", kvErr)
	}
	ops := kh.Ops()
	counts := map[Outcome]int{}
	for _, op := range ops {
		counts[op.Outcome]++
	}
	t.Logf("KV writes: %v; final state: %d keys", counts, len(states[wiped.ID].Entries))
	for _, id := range sortedKeys(states) {
		for _, bad := range CheckKV(ops, states[id].Entries) {
			t.Errorf("%s: %s", id, bad)
		}
	}
	if counts[OK] == 0 || counts[Refused] == 0 {
		t.Errorf("KV writes %v: want acknowledged ones and refused conditional ones", counts)
	}
	// Positive controls: the wiped node really started empty and really
	// got a snapshot shipped.
	if wipedDir == "" || wipedDir == oldDir {
		t.Errorf("%s's directory ID %q after the wipe, %q before: not a new directory", wiped.ID, wipedDir, oldDir)
	}
	if got := installs(t, wiped); got <= before {
		t.Errorf("%s's logs name no installed snapshot after its wipe (%d before, %d after)", wiped.ID, before, got)
	}
	if st := states[wiped.ID]; st.RestoredAt == 0 || st.Opens < 2 {
		t.Errorf("%s's KV: restored at %d, %d opens: want restored from a shipped snapshot after a first open on the empty log", wiped.ID, st.RestoredAt, st.Opens)
	}
}

// fillKV puts keys big-<i%keys> for i in [from, to), values of size
// bytes, with 4 writers (each key always the same one's), retrying each
// put until acknowledged (20 tries).
func fillKV(ctx context.Context, c *Cluster, kh *KVHistory, from, to, keys, size int) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + w; i < to; i += 4 {
				key := fmt.Sprintf("big-%d", i%keys)
				value := fmt.Sprintf("v%d|", i) + strings.Repeat("x", size)
				for try := 0; try < 20 && ctx.Err() == nil; try++ {
					var n *Node
					for k := range c.Nodes {
						if m := c.Nodes[(try+k)%len(c.Nodes)]; m.Running() {
							n = m
							break
						}
					}
					if n == nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
					op := c.KVWrite(octx, n, KVOp{Kind: "put", Key: key, Value: value})
					ocancel()
					kh.Add(op)
					if op.Outcome == OK {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// partialSize is the size of n's partial snapshot file (header and the
// body bytes received), -1 if it has none.
func partialSize(n *Node) int64 {
	fi, err := os.Stat(filepath.Join(n.Dir, "snapshots", "incoming.partial"))
	if err != nil {
		return -1
	}
	return fi.Size()
}

// TestSnapshotTransferSurvivesSIGKILL: a KV of about 6 MiB (400 keys of
// 16 KiB), snapshotted, with retention past offset 0 everywhere; a
// follower is wiped and, while it pulls the leader's snapshot in 32 KiB
// chunks over slowed links, SIGKILLed twice in the middle of the
// transfer (its partial file holding part of the body, watched on its
// disk), and started again each time. It must install the snapshot at
// last (resumed, or started over: R95 allows both) and hold the same KV
// state as the others. Positive controls: each kill found a partial
// neither empty nor whole, and the node's logs name an install.
func TestSnapshotTransferSurvivesSIGKILL(t *testing.T) {
	o := testRunOpts(t)
	o.nodeArgs = append(o.nodeArgs, kvNodeArgs("1MiB", "2MiB", 200)...)
	o.nodeArgs = append(o.nodeArgs, "-fetch-max-bytes", "32KiB")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, _, _ := startRunCluster(ctx, t, o)
	kh := &KVHistory{}
	// Fill the KV: 400 keys of 16 KiB, then writes until the log start
	// moved on every node.
	const keys, size = 400, 16 << 10
	fill := func(from, to int) { fillKV(ctx, c, kh, from, to, keys, size) }
	fill(0, keys)
	for round := 1; ; round++ {
		_, err := waitShippable(ctx, c, 200, 2*time.Second)
		if err == nil {
			break
		}
		if round > 20 {
			t.Fatalf("retention did not move the log start on every node: %v", err)
		}
		fill(keys*round, keys*round+keys/2)
	}
	target, leader := pickFollower(ctx, c)
	if target == nil || leader == nil {
		t.Fatalf("no follower (leader %v)", leader)
	}
	if st, err := c.KVState(ctx, leader, true); err != nil || len(st.Kept) == 0 || st.Kept[0].Size < 4<<20 {
		t.Fatalf("the leader's snapshots: %+v %v: want one of MBs", st.Kept, err)
	} else {
		t.Logf("leader %s keeps snapshots %+v", leader.ID, st.Kept)
	}
	// Slow every link of the target: a chunk per round trip, about 100ms.
	for _, n := range c.Nodes {
		if n != target {
			c.Net.Link(n.ID, target.ID).SetDelay(25 * time.Millisecond)
			c.Net.Link(target.ID, n.ID).SetDelay(25 * time.Millisecond)
		}
	}
	before := installs(t, target)
	if err := c.Wipe(target); err != nil {
		t.Fatal(err)
	}
	var killedAt []int64
	for kill := 0; kill < 2; kill++ {
		// SIGKILL once the partial holds 1 MiB, or, after a kill, 256 KiB
		// more than it held then (a resumed transfer; one started over
		// is below that again: 1 MiB then).
		deadline := time.Now().Add(60 * time.Second)
		floor := func() int64 {
			if len(killedAt) > 0 {
				if last := killedAt[len(killedAt)-1]; partialSize(target) >= last {
					return last + 256<<10
				}
			}
			return 1 << 20
		}
		for partialSize(target) < floor() && time.Now().Before(deadline) {
			if partialSize(target) == -1 && installs(t, target) > before {
				break // installed already: the transfer was faster than the watch
			}
			time.Sleep(2 * time.Millisecond)
		}
		size, want := partialSize(target), floor()
		c.Kill(target)
		if size < want {
			t.Fatalf("kill %d: %s's partial snapshot was %d bytes (want at least %d, installs %d): no transfer under way to interrupt", kill+1, target.ID, size, want, installs(t, target)-before)
		}
		killedAt = append(killedAt, partialSize(target))
		t.Logf("kill %d: SIGKILL with the partial at %d bytes", kill+1, killedAt[kill])
		if err := c.Start(target); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, target); err != nil {
			t.Fatal(err)
		}
	}
	c.Net.HealAll()
	states, err := waitKVAgree(ctx, c, 90*time.Second)
	if err != nil {
		t.Fatalf("the nodes' KV states do not agree after the transfer: %v", err)
	}
	for _, id := range sortedKeys(states) {
		for _, bad := range CheckKV(kh.Ops(), states[id].Entries) {
			t.Errorf("%s: %s", id, bad)
		}
	}
	st := states[target.ID]
	t.Logf("%s: KV restored at %d, %d keys, next %d; partial at the kills %v", target.ID, st.RestoredAt, len(st.Entries), st.Next, killedAt)
	if got := installs(t, target); got <= before {
		t.Errorf("%s's logs name no installed snapshot (%d before, %d after)", target.ID, before, got)
	}
	if st.RestoredAt == 0 || len(st.Entries) != keys {
		t.Errorf("%s's KV: restored at %d with %d keys, want restored from the shipped snapshot with %d", target.ID, st.RestoredAt, len(st.Entries), keys)
	}
	if len(c.Crashes()) > 0 {
		t.Errorf("node processes exited on their own: %v", c.Crashes())
	}
}

// savingSnapshot reports whether n is writing a snapshot: a temporary
// file in its snapshots directory (storage's Save writes one, syncs it
// and renames it into place).
func savingSnapshot(n *Node) bool {
	ents, err := os.ReadDir(filepath.Join(n.Dir, "snapshots"))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			return true
		}
	}
	return false
}

// TestKVSnapshotSaveSurvivesSIGKILL is the key-value view's side of
// storage's TestSnapshotCrashRecovery, on real processes: a KV of about
// 3 MiB (200 keys of 16 KiB) saving a snapshot every 20 operations
// (kv's maybeSnapshot, Log.SaveSnapshot), with retention bounded by the
// snapshots (R87), under writes; a voter (each in turn, the leader too)
// is SIGKILLed while a snapshot's temporary file is in its directory (a
// save under way), 8 times, and started again. Each restart must
// reopen its KV from a snapshot that survived (restored above 0: the
// log no longer holds offset 0), and at the end every node's KV state
// must be the same and what the acknowledged writes leave. Positive
// control: most kills interrupted a save (its temporary file is still in
// the directory once the process is dead, not only seen before the
// signal: a save may end in between).
func TestKVSnapshotSaveSurvivesSIGKILL(t *testing.T) {
	o := testRunOpts(t)
	o.nodeArgs = append(o.nodeArgs, kvNodeArgs("512KiB", "1MiB", 20)...)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, _, _ := startRunCluster(ctx, t, o)
	kh := &KVHistory{}
	const keys, size = 200, 16 << 10
	fillKV(ctx, c, kh, 0, keys, keys, size)
	// Writes go on until retention moved the log start: the KV saves
	// only as it applies, and retention stops at its newest snapshot.
	for round := 1; ; round++ {
		_, err := waitShippable(ctx, c, 100, 2*time.Second)
		if err == nil {
			break
		}
		if round > 20 {
			t.Fatalf("before the kills: %v", err)
		}
		fillKV(ctx, c, kh, keys*round, keys*round+keys/4, keys, size)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			fillKV(ctx, c, kh, i*keys, i*keys+keys/4, keys, size)
		}
	}()
	hits := 0
	const kills = 8
	for k := range kills {
		target := c.Voters()[k%len(c.Voters())]
		deadline := time.Now().Add(10 * time.Second)
		for !savingSnapshot(target) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		saving := savingSnapshot(target)
		c.Kill(target)
		// The temporary file outlives the process only if the kill came
		// before the save's rename: a save seen under way may have ended
		// before the signal landed.
		if saving && savingSnapshot(target) {
			hits++
		}
		if err := c.Start(target); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, target); err != nil {
			t.Fatal(err)
		}
		var st KVState
		var err error
		for wait := time.Now().Add(30 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
			if st, err = c.KVState(ctx, target, false); err == nil {
				break
			}
		}
		if err != nil || st.RestoredAt == 0 {
			t.Fatalf("kill %d of %s (a save under way: %t): its KV after the restart: %+v, %v: want one restored from a snapshot", k+1, target.ID, saving, st, err)
		}
		t.Logf("kill %d of %s (a save under way: %t; interrupted: %d so far): KV restored at %d", k+1, target.ID, saving, hits, st.RestoredAt)
	}
	close(stop)
	<-done
	states, err := waitKVAgree(ctx, c, 90*time.Second)
	if err != nil {
		t.Fatalf("the nodes' KV states do not agree: %v", err)
	}
	for _, id := range sortedKeys(states) {
		for _, bad := range CheckKV(kh.Ops(), states[id].Entries) {
			t.Errorf("%s: %s", id, bad)
		}
		if len(states[id].Entries) != keys {
			t.Errorf("%s holds %d keys, want %d", id, len(states[id].Entries), keys)
		}
	}
	if hits < kills/2 {
		t.Errorf("only %d of %d kills interrupted a snapshot save (its temporary file left behind)", hits, kills)
	}
	if len(c.Crashes()) > 0 {
		t.Errorf("node processes exited on their own: %v", c.Crashes())
	}
}
