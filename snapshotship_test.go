package replog

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// stateOf is the test's state machine: the data of the entries applied,
// in order, one per line.
func stateOf(es []Entry) []byte {
	var b bytes.Buffer
	for _, e := range es {
		b.Write(e.Data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestWipedFollowerRestoresFromShippedSnapshot (R92-R95): on a log whose
// leader deleted the prefix below its snapshot, a wiped follower gets the
// leader's snapshot, in many chunks (FetchMaxBytes bounds each), before
// it resets to the leader's log start; OpenSnapshot then returns it there,
// and the snapshot plus the entries from its offset on make exactly the
// state a node that replayed everything holds.
func TestWipedFollowerRestoresFromShippedSnapshot(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) {
		o.RetainUntilSnapshot = true
		o.FetchMaxBytes = 16 << 10
	})
	lead := c.leader(15 * time.Second)
	l := c.nodes[lead]
	waitFor(t, "feature level 9", 10*time.Second, func() bool {
		return l.Status().FeatureLevel >= protocol.FeatureLevelSnapshotTransfer
	})
	ctx, cancel := appendCtx(t)
	defer cancel()
	rec := strings.Repeat("r", 900)
	var all []Entry
	for i := range 200 {
		data := fmt.Appendf(nil, "%04d-%s", i, rec)
		off, err := l.Append(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, Entry{Offset: off, Data: data})
	}
	// The leader's state as of entry 150: ~135 KiB, nine chunks.
	snapAt := all[150].Offset
	want := stateOf(all[:150])
	waitFor(t, "the appends readable on the leader", 10*time.Second, func() bool { return l.Status().ReadableHW > all[199].Offset })
	info, err := saveBytes(t, l, snapAt, want)
	if err != nil {
		t.Fatal(err)
	}
	var follower string
	for id := range c.nodes {
		if id != lead {
			follower = id
			break
		}
	}
	waitFor(t, "every node at the HW", 10*time.Second, func() bool {
		for _, n := range c.nodes {
			if n.Status().HighWatermark < all[199].Offset+1 {
				return false
			}
		}
		return true
	})
	got, err := l.DeleteBefore(ctx, snapAt)
	if err != nil || got == 0 || got > snapAt {
		t.Fatalf("DeleteBefore(%d) = %d, %v", snapAt, got, err)
	}
	f := c.wipe(follower)
	waitFor(t, "the wiped follower to install the leader's snapshot", 20*time.Second, func() bool {
		s := f.Snapshots()
		return len(s) == 1 && s[0].Offset == snapAt
	})
	// The reset waited for the install: the log start is the leader's.
	waitFor(t, "the wiped follower to catch up", 20*time.Second, func() bool {
		st := f.Status()
		return st.LogStart == got && st.HighWatermark >= all[199].Offset+1
	})
	si, body, err := openBytes(t, f)
	if err != nil || si.Offset != info.Offset || !bytes.Equal(body, want) {
		t.Fatalf("OpenSnapshot on the wiped follower: %+v, %d bytes (want %d), %v", si, len(body), len(want), err)
	}
	// Restore, then read on: exactly the state of all 200 entries.
	state := append([]byte(nil), body...)
	n := 0
	for e, err := range f.ReadRange(ctx, si.Offset, all[199].Offset+1) {
		if err != nil {
			t.Fatal(err)
		}
		state = append(append(state, e.Data...), '\n')
		n++
	}
	if !bytes.Equal(state, stateOf(all)) || n != 50 {
		t.Fatalf("restored state differs from the replayed one (%d entries read on)", n)
	}
	// It goes on following: a new entry reaches it.
	off, err := l.Append(ctx, []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new entry on the wiped follower", 10*time.Second, func() bool { return f.Status().HighWatermark > off })
}

// TestSnapshotTransferSurvivesARestart (R95): a follower closed in the
// middle of a transfer keeps the bytes it received (the partial file), and
// once restarted it finishes the transfer, installs the leader's snapshot
// whole and catches up; its state is the leader's.
func TestSnapshotTransferSurvivesARestart(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) {
		o.RetainUntilSnapshot = true
		o.FetchMaxBytes = 4 << 10
	})
	lead := c.leader(15 * time.Second)
	l := c.nodes[lead]
	waitFor(t, "feature level 9", 10*time.Second, func() bool {
		return l.Status().FeatureLevel >= protocol.FeatureLevelSnapshotTransfer
	})
	ctx, cancel := appendCtx(t)
	defer cancel()
	var last uint64
	for i := range 20 {
		off, err := l.Append(ctx, fmt.Appendf(nil, "e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		last = off
	}
	// 4 MiB of state in 4 KiB chunks: a thousand round trips, time enough
	// to close the follower in the middle.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18)
	waitFor(t, "the appends readable on the leader", 10*time.Second, func() bool { return l.Status().ReadableHW > last })
	if _, err := saveBytes(t, l, last+1, want); err != nil {
		t.Fatal(err)
	}
	var follower string
	for id := range c.nodes {
		if id != lead {
			follower = id
			break
		}
	}
	waitFor(t, "every node at the HW", 10*time.Second, func() bool {
		for _, n := range c.nodes {
			if n.Status().HighWatermark < last+1 {
				return false
			}
		}
		return true
	})
	if got, err := l.DeleteBefore(ctx, last+1); err != nil || got == 0 {
		t.Fatalf("DeleteBefore = %d, %v", got, err)
	}
	f := c.wipe(follower)
	waitFor(t, "part of the snapshot on the follower", 20*time.Second, func() bool {
		p, ok := f.snap.store.Partial()
		return ok && p.Have > 0
	})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, follower)
	f = c.restart(follower)
	if p, ok := f.snap.store.Partial(); ok && p.Have == 0 && len(f.Snapshots()) == 0 {
		t.Fatalf("the partial snapshot was not kept across the restart: %+v", p)
	}
	waitFor(t, "the restarted follower to install the snapshot", 30*time.Second, func() bool {
		s := f.Snapshots()
		return len(s) == 1 && s[0].Offset == last+1
	})
	// OpenSnapshot returns it once the log holds the entry below its
	// offset (R94): the log start may be below it (R51 keeps the last
	// committed entry).
	waitFor(t, "the restarted follower to catch up", 20*time.Second, func() bool { return f.Status().HighWatermark >= last+1 })
	_, body, err := openBytes(t, f)
	if err != nil || !bytes.Equal(body, want) {
		t.Fatalf("OpenSnapshot after the resumed transfer: %d bytes (want %d), %v", len(body), len(want), err)
	}
}
