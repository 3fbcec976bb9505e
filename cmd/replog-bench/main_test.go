package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/storage"
)

// The retention flags reach every node's Options (the voters' and the
// catch-up observer's: both are built by config.options).
func TestRetentionFlagsFeedOptions(t *testing.T) {
	c, err := parseFlags([]string{"-retention-bytes", "256MiB", "-retention-age", "90m", "-segment-bytes", "16MiB", "-disk-every", "5s", "-catchup", "1000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.diskEvery != 5*time.Second || c.catchup != 1000 {
		t.Fatalf("disk-every %v, catchup %d", c.diskEvery, c.catchup)
	}
	peers := map[string]string{"n1": "127.0.0.1:1", "obs": "127.0.0.1:2"}
	for _, id := range []string{"n1", observerID} {
		o := c.options("/d/"+id, id, []string{"n1"}, peers, []byte("0123456789abcdef"))
		if o.RetentionBytes != 256<<20 || o.RetentionAge != 90*time.Minute || o.SegmentBytes != 16<<20 {
			t.Fatalf("%s: RetentionBytes %d, RetentionAge %v, SegmentBytes %d", id, o.RetentionBytes, o.RetentionAge, o.SegmentBytes)
		}
		if o.RPCAddr != peers[id] || o.NodeID != id || o.Dir != "/d/"+id {
			t.Fatalf("%s: options %+v", id, o)
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}

	// The quota and the backlog bound reach the Options; off is negative.
	c, err = parseFlags([]string{"-catchup-rate", "64MiB", "-max-uncommitted", "off"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.options("/d", "n1", []string{"n1"}, nil, nil); o.CatchUpBytesPerSecond != 64<<20 || o.MaxUncommittedBytes >= 0 {
		t.Fatalf("-catchup-rate 64MiB -max-uncommitted off: CatchUpBytesPerSecond %d, MaxUncommittedBytes %d", o.CatchUpBytesPerSecond, o.MaxUncommittedBytes)
	}

	// Defaults: retention off, the store's segment size, samples every 2s.
	c, err = parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.options("/d", "n1", []string{"n1"}, nil, nil)
	if o.RetentionBytes != 0 || o.RetentionAge != 0 || o.SegmentBytes != 0 || c.diskEvery != 2*time.Second || c.catchup != 0 {
		t.Fatalf("defaults: %+v, disk-every %v, catchup %d", o, c.diskEvery, c.catchup)
	}
}

func TestDiskBound(t *testing.T) {
	for _, tc := range []struct {
		retention, segment, want int64
	}{
		{0, 16 << 20, 0}, // no retention, no bound
		{256 << 20, 16 << 20, 288 << 20},
		{32 << 20, 4 << 20, 40 << 20},
		{100, 0, 100 + 2*storage.DefaultSegmentBytes},
	} {
		c := config{retentionBytes: tc.retention, segmentBytes: tc.segment}
		if got := c.diskBound(); got != tc.want {
			t.Errorf("retention %d segment %d: bound %d, want %d", tc.retention, tc.segment, got, tc.want)
		}
	}
}

// Bad values are refused naming their flag; -clients 0 only with -catchup
// (positive control: the same with -catchup parses).
func TestParseFlagsRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"-retention-bytes", "-5"},
		{"-segment-bytes", "lots"},
		{"-retention-age", "-1s"},
		{"-disk-every", "0s"},
		{"-catchup", "-1"},
		{"-via", "nowhere"},
		{"-clients", "0"},
		{"-create-concurrency", "0"},
		{"-kv-clients", "-1"},
		{"-kv-keys", "0"},
		{"-snapshot-mb", "-1"},
		{"-kv-clients", "4", "-snapshot-mb", "4"},
	} {
		_, err := parseFlags(args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%q: error %v, want one naming %s", args, err, args[0])
		}
	}
	if _, err := parseFlags([]string{"-nosuchflag"}, io.Discard); err == nil {
		t.Error("an unknown flag was accepted")
	}
	if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if _, err := parseFlags([]string{"-clients", "0", "-catchup", "10"}, io.Discard); err != nil {
		t.Errorf("-clients 0 -catchup 10: %v", err)
	}
}

// The sampler keeps each directory's largest and last size, and counts
// its files; a directory not there yet is empty.
func TestDiskSampler(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "missing")
	if err := os.Mkdir(a, 0o700); err != nil {
		t.Fatal(err)
	}
	s := newDiskSampler([]string{a, b})
	write := func(name string, n int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(a, name), make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("x", 1000)
	s.sample()
	write("y", 3000)
	s.sample()
	if err := os.Remove(filepath.Join(a, "y")); err != nil {
		t.Fatal(err)
	}
	write("x", 500)
	s.sample()
	n, maxes, finals := s.results()
	if n != 3 {
		t.Fatalf("samples = %d, want 3", n)
	}
	if maxes[0].Size != 4000 || finals[0].Size != 500 || maxes[0].Files != 2 || finals[0].Files != 1 {
		t.Fatalf("a: max %+v, final %+v; want sizes 4000 and 500, files 2 and 1", maxes[0], finals[0])
	}
	if maxes[1] != (diskUsage{}) || finals[1] != (diskUsage{}) {
		t.Fatalf("missing directory: max %+v, final %+v", maxes[1], finals[1])
	}

	// start samples at once, and stop takes the final sample.
	stop := s.start(time.Hour)
	write("x", 7000)
	stop()
	if n, maxes, finals = s.results(); n != 5 || maxes[0].Size != 7000 || finals[0].Size != 7000 {
		t.Fatalf("after start/stop: %d samples, max %+v, final %+v", n, maxes[0], finals[0])
	}
}

// The catch-up mode end to end on one voter without fsync: the observer
// reaches the HW the leader had when it started, holding every filled
// record, and its directory rolled segments at -segment-bytes (the flag
// reached the observer's store).
func TestCatchupMode(t *testing.T) {
	dir := t.TempDir()
	c, err := parseFlags([]string{"-nodes", "1", "-clients", "2", "-size", "512", "-duration", "200ms", "-nosync", "-catchup", "3000", "-segment-bytes", "256KiB", "-disk-every", "50ms", "-dir", dir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := run(c, &out)
	if err != nil {
		t.Fatal(err)
	}
	cu := rep.catchup
	if cu == nil || cu.target < 3000 || cu.reached < cu.target || cu.reached-cu.from < 3000 {
		t.Fatalf("catch-up %+v\n%s", cu, out.String())
	}
	if len(cu.before.lat) == 0 || cu.during.elapsed == 0 {
		t.Fatalf("loads before %d appends, during %v\n%s", len(cu.before.lat), cu.during.elapsed, out.String())
	}
	// 3000 records of 512 bytes are 1.5 MB: sealed segments at 256 KiB,
	// none at the default 64 MiB.
	if obs := len(rep.names) - 1; rep.names[obs] != observerID || rep.diskFinal[obs].Size < 1500_000 {
		t.Fatalf("observer %s's directory: %+v\n%s", rep.names[obs], rep.diskFinal[obs], out.String())
	}
	sealed, err := filepath.Glob(filepath.Join(dir, observerID, "*.seg"))
	if err != nil || len(sealed) == 0 {
		t.Fatalf("observer's sealed segments: %q, %v\n%s", sealed, err, out.String())
	}
	for _, want := range []string{"fill records=3000", "before catch-up: appends=", "catch-up obs: entries=", "during catch-up: latency p50=", "disk obs max=", "peak RSS="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFloor: the floor's parts are measured (a write and sync, a round
// trip: neither can take no time) and printed as the one line a 1-client
// commit is compared with.
func TestFloor(t *testing.T) {
	f, err := measureFloor(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.sync <= 0 || f.rtt <= 0 {
		t.Fatalf("floor %+v: a part measured no time", f)
	}
	if s := f.String(); !strings.HasPrefix(s, "floor: 4KiB write+fdatasync p50 ") || !strings.Contains(s, "loopback round trip p50 ") {
		t.Fatalf("floor line %q", s)
	}
}

// The state-on-the-log modes run and print their result lines: the KV
// mode's three operations with completed ones, and the snapshot mode's
// save and its install on the empty observer.
func TestStateModes(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		lines []string
	}{
		{[]string{"-nodes", "1", "-nosync", "-kv-clients", "2", "-kv-keys", "20", "-duration", "1s"},
			[]string{"kv put clients=2 ops=", "kv get clients=2 ops=", "kv get-linearizable clients=2 ops=", "kv stats keys=20 "}},
		{[]string{"-nodes", "1", "-nosync", "-snapshot-mb", "3"},
			[]string{"snapshot saved offset=", "size=3MiB", "snapshot shipped to obs (empty; leader log start", "installed in "}},
	} {
		c, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		c.dir = t.TempDir()
		var out bytes.Buffer
		if _, err := run(c, &out); err != nil {
			t.Fatalf("%q: %v\n%s", tc.args, err, out.String())
		}
		for _, l := range tc.lines {
			if !strings.Contains(out.String(), l) {
				t.Errorf("%q: no %q in\n%s", tc.args, l, out.String())
			}
		}
		if strings.Contains(out.String(), " ops=0 ") {
			t.Errorf("%q: an operation completed nothing:\n%s", tc.args, out.String())
		}
	}
}
