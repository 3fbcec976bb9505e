package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/bytesize"
	"github.com/replog-io/replog/storage"
)

// config is the command line, parsed.
type config struct {
	nodes      int
	clients    int
	async      int
	size       int
	duration   time.Duration
	via        string
	dir        string
	nosync     bool
	cpuprofile string
	// trace, if set, is where the run's execution trace goes
	// (runtime/trace; go tool trace): scheduler latency, syscalls and
	// the goroutines a commit passes through.
	trace string
	// memprofile, if set, is where the heap profile goes: in the idle
	// mode once the idle logs are open (after a collection), otherwise at
	// the end of the run.
	memprofile string

	// Retention, fed to every node's Options.
	retentionBytes int64
	retentionAge   time.Duration
	segmentBytes   int64
	// diskEvery is how often the disk sampler measures each node's data
	// directory.
	diskEvery time.Duration
	// catchup, when positive, selects the catch-up mode: fill the log with
	// this many records, then start an empty observer and time its
	// catch-up.
	catchup int
	// compactKeys, when positive, selects the compaction mode
	// (compact.go): compactUpdates keyed updates over compactKeys keys,
	// then a pass at compactRate (Compaction.BytesPerSecond).
	compactKeys, compactUpdates int
	compactRate                 int64
	// kvClients, when positive, selects the KV mode (kvrates.go): Put,
	// Get and GetLinearizable of package kv on the leader, each by
	// kvClients clients for -duration, over kvKeys keys.
	kvClients, kvKeys int
	// snapshotMB, when positive, selects the snapshot mode
	// (snapshotrate.go): a snapshot of that many MiB on the leader,
	// shipped to an empty observer.
	snapshotMB int
	// Exactly once: ids gives every append its own replog.WithID;
	// noIdempotence sets Options.DisableIdempotence (appends carry no
	// producer key and are not retried across leader changes, to
	// measure what idempotence costs).
	ids           bool
	noIdempotence bool
	// Load that must not hurt the commit path (R73, R74), fed to every
	// node's Options: 0 the default, negative off.
	catchupRate    int64
	maxUncommitted int64
	// restart, when positive, selects the restart mode: fill the log
	// with this many records, close every node, drop the directories'
	// cached pages and open them again, timing the first commit.
	restart int
	// The many-logs modes (logs.go), each selected by its count: logs
	// named logs under -clients appenders each; idleLogs idle ones,
	// measured for -duration; createLogs created one after another;
	// restartLogs with a node restarted; failoverLogs with the node
	// leading the most of them killed.
	logs, idleLogs, createLogs, restartLogs, failoverLogs int
	// createConcurrency is how many goroutines the many-logs modes
	// create their logs from at once (1: one after another): what
	// -create-logs times.
	createConcurrency int
}

// offOrSize is a flag.Value for a size in bytes that "off" turns off
// (stored as -1: the Options' "negative: off"); 0 is the default.
type offOrSize struct{ P *int64 }

func (f offOrSize) String() string {
	if f.P != nil && *f.P < 0 {
		return "off"
	}
	return bytesize.Flag(f).String()
}

func (f offOrSize) Set(v string) error {
	if v == "off" {
		*f.P = -1
		return nil
	}
	return bytesize.Flag(f).Set(v)
}

// parseFlags parses args (without the program name). Errors from the flag
// package (flag.ErrHelp, an unknown flag) are returned as they are; a bad
// value returns an error naming its flag.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("replog-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.nodes, "nodes", 3, "number of voters")
	fs.IntVar(&c.clients, "clients", 1, "concurrent appenders (0 only with -catchup: the catch-up without a load)")
	fs.IntVar(&c.size, "size", 128, "record size in bytes")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to append (with -catchup: the load before the observer starts)")
	fs.StringVar(&c.dir, "dir", "", "data directory (default: a temporary one, removed at the end)")
	fs.BoolVar(&c.nosync, "nosync", false, "disable fsync (not what production does)")
	fs.StringVar(&c.via, "via", "leader", "where appenders send: leader or all (round robin, followers forward)")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&c.trace, "trace", "", "write an execution trace of the run to this file (go tool trace)")
	fs.StringVar(&c.memprofile, "memprofile", "", "write a heap profile to this file: with -idle-logs once the idle logs are open, otherwise at the end of the run")
	fs.IntVar(&c.async, "async", 0, "appends each appender keeps in flight with AppendAsync (0: synchronous Append)")
	fs.Var(bytesize.Flag{P: &c.retentionBytes}, "retention-bytes", "Options.RetentionBytes: keep about this many bytes per node, e.g. 256MiB (0: keep everything)")
	fs.DurationVar(&c.retentionAge, "retention-age", 0, "Options.RetentionAge: delete segments whose newest entry is older (0: off)")
	fs.Var(bytesize.Flag{P: &c.segmentBytes}, "segment-bytes", "Options.SegmentBytes: roll segment files at this size, e.g. 16MiB (0: the default, 64MiB)")
	fs.DurationVar(&c.diskEvery, "disk-every", 2*time.Second, "how often to sample each node's data-directory size")
	fs.IntVar(&c.catchup, "catchup", 0, "catch-up mode: fill the log with N records, then time an empty observer's catch-up (0: off)")
	fs.IntVar(&c.restart, "restart", 0, "restart mode: fill the log with N records, close every node, drop the cached pages, open them again and time the first commit (0: off)")
	fs.BoolVar(&c.ids, "id", false, "give every append its own ID (replog.WithID), as a client deduplicating its retries would")
	fs.BoolVar(&c.noIdempotence, "no-idempotence", false, "Options.DisableIdempotence: appends carry no producer key and are not retried across leader changes, to measure what idempotence costs")
	fs.Var(offOrSize{P: &c.catchupRate}, "catchup-rate", "Options.CatchUpBytesPerSecond of every node: the leader's replication quota per second, e.g. 64MiB, or off (0: the default, 32MiB)")
	fs.Var(offOrSize{P: &c.maxUncommitted}, "max-uncommitted", "Options.MaxUncommittedBytes of every node, e.g. 16MiB, or off (0: the default, 64MiB)")
	fs.IntVar(&c.logs, "logs", 0, "many-logs mode: N named logs on the nodes (replog.Node), -clients appenders on each; prints the total (0: off)")
	fs.IntVar(&c.idleLogs, "idle-logs", 0, "idle mode: N idle named logs, measured for -duration against one: CPU per node, fetches/s per peer pair, heap per log (0: off)")
	fs.IntVar(&c.createLogs, "create-logs", 0, "create mode: time creating N named logs one after another (0: off)")
	fs.IntVar(&c.createConcurrency, "create-concurrency", 1, "create the logs from this many goroutines at once, each taking the next name (1: one after another): what -create-logs times, and how the other many-logs modes set up theirs")
	fs.IntVar(&c.restartLogs, "restart-logs", 0, "restart mode with N named logs: restart one node, time until every log accepts an append through it (0: off)")
	fs.IntVar(&c.compactKeys, "compact-keys", 0, "compaction mode: append -compact-updates keyed updates over N keys (replog.WithKey) on a compacted log, then run a pass under the load: disk before and after, the pass's rate, append p99 before and during (0: off)")
	fs.IntVar(&c.compactUpdates, "compact-updates", 1_000_000, "compaction mode: how many keyed updates to append")
	fs.Var(offOrSize{P: &c.compactRate}, "compact-rate", "compaction mode: Compaction.BytesPerSecond, e.g. 64MiB, or off (0: the default, 16MiB)")
	fs.IntVar(&c.kvClients, "kv-clients", 0, "KV mode: N clients of package kv on the leader, each operation for -duration: Put, Get (local) and GetLinearizable (a barrier first), over -kv-keys keys of -size bytes; prints ops/s, p50 and p99 of each (0: off)")
	fs.IntVar(&c.kvKeys, "kv-keys", 1000, "KV mode: how many keys the clients write and read")
	fs.IntVar(&c.snapshotMB, "snapshot-mb", 0, "snapshot mode: save a snapshot of N MiB on the leader, delete the log below it and start an empty observer: time until it installed the shipped snapshot, MB/s (0: off)")
	fs.IntVar(&c.failoverLogs, "failover-logs", 0, "fail-over mode: N named logs, kill the node leading the most, time until every log has a leader again (0: off)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, c.validate()
}

// validate names the first bad flag.
func (c config) validate() error {
	minClients := 1
	if c.catchup > 0 {
		minClients = 0
	}
	switch {
	case c.nodes < 1:
		return fmt.Errorf("-nodes must be at least 1, got %d", c.nodes)
	case c.clients < minClients:
		return fmt.Errorf("-clients must be at least %d, got %d", minClients, c.clients)
	case c.size < 0:
		return fmt.Errorf("-size must not be negative, got %d", c.size)
	case c.duration <= 0:
		return fmt.Errorf("-duration must be positive, got %v", c.duration)
	case c.async < 0:
		return fmt.Errorf("-async must not be negative, got %d", c.async)
	case c.via != "leader" && c.via != "all":
		return fmt.Errorf("-via must be leader or all, got %q", c.via)
	case c.retentionAge < 0:
		return fmt.Errorf("-retention-age must not be negative, got %v", c.retentionAge)
	case c.diskEvery <= 0:
		return fmt.Errorf("-disk-every must be positive, got %v", c.diskEvery)
	case c.catchup < 0:
		return fmt.Errorf("-catchup must not be negative, got %d", c.catchup)
	case c.compactKeys < 0 || c.compactUpdates < 0:
		return fmt.Errorf("-compact-keys and -compact-updates must not be negative")
	case c.kvClients < 0 || c.kvKeys < 1 || c.snapshotMB < 0:
		return fmt.Errorf("-kv-clients and -snapshot-mb must not be negative, -kv-keys must be at least 1")
	case c.restart < 0:
		return fmt.Errorf("-restart must not be negative, got %d", c.restart)
	case c.createConcurrency < 1:
		return fmt.Errorf("-create-concurrency must be at least 1, got %d", c.createConcurrency)
	case c.logs < 0 || c.idleLogs < 0 || c.createLogs < 0 || c.restartLogs < 0 || c.failoverLogs < 0:
		return fmt.Errorf("-logs, -idle-logs, -create-logs, -restart-logs and -failover-logs must not be negative")
	}
	modes := 0
	for _, n := range []int{c.restart, c.catchup, c.compactKeys, c.kvClients, c.snapshotMB, c.logs, c.idleLogs, c.createLogs, c.restartLogs, c.failoverLogs} {
		if n > 0 {
			modes++
		}
	}
	if modes > 1 {
		return fmt.Errorf("-restart, -catchup, -compact-keys, -kv-clients, -snapshot-mb, -logs, -idle-logs, -create-logs, -restart-logs and -failover-logs are modes: give one")
	}
	return nil
}

// options are node id's Options: the cluster's voters and static peers,
// authenticated by secret, with the retention flags. A node alone (no
// peers) runs without a transport.
func (c config) options(dir, id string, voters []string, peers map[string]string, secret []byte) replog.Options {
	o := replog.Options{
		Dir:            dir,
		NodeID:         id,
		Voters:         voters,
		RPCAddr:        peers[id],
		Peers:          peers,
		NoSync:         c.nosync,
		Secret:         secret,
		RetentionBytes: c.retentionBytes,
		RetentionAge:   c.retentionAge,
		SegmentBytes:   c.segmentBytes,

		DisableIdempotence: c.noIdempotence,

		CatchUpBytesPerSecond: int(c.catchupRate),
		MaxUncommittedBytes:   int(c.maxUncommitted),
	}
	if c.compactKeys > 0 {
		// The pass is started by the mode, right after the fill: the lag
		// (never below DedupWindow) must not hold the fill back.
		o.DedupWindow = time.Millisecond
		o.Compaction = replog.Compaction{Enabled: true, Lag: time.Millisecond, Interval: 24 * time.Hour, BytesPerSecond: c.compactRate}
	}
	if len(peers) == 0 {
		o.RPCAddr, o.Peers, o.Secret = "", nil, nil
	}
	return o
}

// diskBound is what a node may hold on disk with -retention-bytes: the
// retention, one sealed segment more (the policy drops whole segments
// only while the rest still exceed it) and the active one (Options'
// RetentionBytes doc). 0 without -retention-bytes: no bound.
func (c config) diskBound() int64 {
	if c.retentionBytes <= 0 {
		return 0
	}
	seg := c.segmentBytes
	if seg <= 0 {
		seg = storage.DefaultSegmentBytes
	}
	return c.retentionBytes + 2*seg
}

// mib formats bytes in MiB (KiB below one, exact where it divides);
// a negative count is unknown.
func mib(b int64) string {
	switch {
	case b < 0:
		return "unknown"
	case b > 0 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b > 0 && b < 1<<20 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}
