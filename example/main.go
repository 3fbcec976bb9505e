package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/bytesize"
)

// config holds the command line.
type config struct {
	id           string
	dir          string
	httpAddr     string
	rpcAddr      string
	rpcAdvertise string
	gossipAddr   string
	join         []string
	voters       []string
	peers        map[string]string
	httpPeers    map[string]string
	cluster      string
	nosync       bool

	// Peer authentication (see security.go).
	secretFile string
	tlsCert    string
	tlsKey     string
	tlsCA      string
	insecure   bool

	fetchTimeout    time.Duration
	electionTimeout time.Duration
	fetchMaxWait    time.Duration

	// Retention (replog.Options.RetentionBytes, RetentionAge,
	// SegmentBytes); 0 is replog's default (keep everything; 64 MiB
	// segments).
	retentionBytes int64
	retentionAge   time.Duration
	segmentBytes   int64
	deleteTimeout  time.Duration
	// retainUntilSnapshot is replog's RetainUntilSnapshot: retention
	// stops at the node's newest snapshot (the KV's), so its state can
	// always be rebuilt on the node.
	retainUntilSnapshot bool
	// fetchMaxBytes is replog's FetchMaxBytes (0: its default, 1 MiB):
	// also the size of a shipped snapshot's chunks.
	fetchMaxBytes int64
	// dedupWindow is replog's DedupWindow (0: its default, 2 minutes);
	// a compaction lag is never shorter.
	dedupWindow time.Duration

	// Compaction of the default log (replog.Options.Compaction): on with
	// compact; the rest 0 for replog's defaults (compact.go).
	compact           bool
	compactLag        time.Duration
	compactTombstones time.Duration
	compactRate       int64
	compactEvery      time.Duration

	// The key-value view's snapshots (kv.Options.SnapshotEveryEntries,
	// SnapshotEveryBytes): every kvSnapshotEvery operations or
	// kvSnapshotBytes bytes of them, whichever comes first (0: not by
	// that measure).
	kvSnapshotEvery int
	kvSnapshotBytes int64

	// Voter changes: how long POST /voters/add and /voters/remove wait;
	// replog's ManualVoterChanges.
	voterTimeout time.Duration
	manualVoters bool

	// The demo's cluster: voters n1..nN, then spare nodes (observers,
	// not started until asked).
	nodes  int
	spares int

	// logs is how many named logs, log-1..log-N, the node creates at
	// start (logs.go).
	logs int

	// -pipeline FROM=TO and its cursor's name (pipeline.go).
	pipeline       string
	pipelineCursor string

	control        string
	logLevel       string
	appendTimeout  time.Duration
	sampleInterval time.Duration
	sampleIdle     time.Duration
}

// listFlag is a comma-separated list flag.
type listFlag struct{ p *[]string }

func (f listFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strings.Join(*f.p, ",")
}

func (f listFlag) Set(v string) error {
	*f.p = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*f.p = append(*f.p, s)
		}
	}
	return nil
}

// mapFlag is a comma-separated list of id=value pairs.
type mapFlag struct{ p *map[string]string }

func (f mapFlag) String() string {
	if f.p == nil {
		return ""
	}
	var parts []string
	for k, v := range *f.p {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (f mapFlag) Set(v string) error {
	m := map[string]string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, val, ok := strings.Cut(s, "=")
		if !ok || k == "" || val == "" {
			return fmt.Errorf("want id=value, got %q", s)
		}
		m[k] = val
	}
	*f.p = m
	return nil
}

// parseFlags parses args (without the program name).
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage:\n  example [-dir D] [-nodes N]     demo: N voters (3) and a spare node as child processes\n  example -id ID -dir D [flags]   one node\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.id, "id", "", "node ID; without it the demo runs")
	fs.StringVar(&c.dir, "dir", "", "data directory (node: required; demo: parent of n1..n3, reused across runs; default a temp dir)")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:0", "HTTP listen address; the bound address is printed as http=ADDR and written to DIR/http.addr")
	fs.StringVar(&c.rpcAddr, "rpc", "", "replication transport listen address (default 127.0.0.1:0 in a cluster)")
	fs.StringVar(&c.rpcAdvertise, "rpc-advertise", "", "address other nodes dial (default: the bound -rpc)")
	fs.StringVar(&c.gossipAddr, "gossip", "", "memberlist bind address; empty disables gossip")
	fs.Var(listFlag{&c.join}, "join", "gossip seed addresses, comma-separated")
	fs.Var(listFlag{&c.voters}, "voters", "bootstrap voter IDs, comma-separated: a new cluster's first voters (all must be up for its first election); afterwards the log records the voters (POST /voters/add, /voters/remove) (default: just -id)")
	fs.Var(mapFlag{&c.peers}, "peers", "static RPC addresses: n2=127.0.0.1:9002,n3=...")
	fs.Var(mapFlag{&c.httpPeers}, "http-peers", "HTTP base URLs of the other nodes: n2=http://127.0.0.1:8082,...")
	fs.StringVar(&c.cluster, "cluster", "replog-example", "cluster ID")
	fs.BoolVar(&c.nosync, "nosync", false, "disable fsync (tests only: a machine crash can lose acknowledged appends)")
	fs.StringVar(&c.secretFile, "secret-file", "", "file holding the cluster secret (at least 16 bytes, the same on every node; mode 0600; a trailing newline is ignored); it authenticates the transport and keys gossip. The demo generates one for its nodes")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate of this node (mutual TLS; with -tls-key and -tls-ca); it must name the node ID (DNS name or common name)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key for -tls-cert")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM CA certificates that sign the nodes' certificates")
	fs.BoolVar(&c.insecure, "insecure", false, "run a cluster node without -secret-file or mutual TLS: anyone who reaches its ports can read, forge or erase the log")
	fs.DurationVar(&c.fetchTimeout, "fetch-timeout", 0, "replog FetchTimeout (0: replog's default)")
	fs.DurationVar(&c.electionTimeout, "election-timeout", 0, "replog ElectionTimeout (0: replog's default)")
	fs.DurationVar(&c.fetchMaxWait, "fetch-max-wait", 0, "replog FetchMaxWait (0: replog's default)")
	fs.Var(bytesize.Flag{P: &c.retentionBytes}, "retention-bytes", "keep about this many bytes of log per node, deleting the oldest whole segments (replog RetentionBytes; e.g. 256MiB; 0: keep everything)")
	fs.DurationVar(&c.retentionAge, "retention-age", 0, "delete whole segments whose newest entry is older than this (replog RetentionAge; e.g. 168h; 0: off)")
	fs.Var(bytesize.Flag{P: &c.segmentBytes}, "segment-bytes", "roll the active segment file at this size; retention frees disk in whole segments (replog SegmentBytes; e.g. 16MiB; 0: replog's default, 64MiB)")
	fs.BoolVar(&c.retainUntilSnapshot, "retain-until-snapshot", false, "retention and /delete-before never delete past this node's newest snapshot (the key-value view's; replog RetainUntilSnapshot): the node can always rebuild its /kv state. Set it on every node")
	fs.Var(bytesize.Flag{P: &c.fetchMaxBytes}, "fetch-max-bytes", "bound one fetch answer's entry bytes, and a shipped snapshot's chunk (replog FetchMaxBytes; e.g. 64KiB; 0: replog's default, 1MiB); a larger record still travels, alone in its answer")
	fs.IntVar(&c.kvSnapshotEvery, "kv-snapshot-every", defaultKVSnapshotEvery, "the key-value view saves a snapshot of its state every this many operations it applies (kv SnapshotEveryEntries; 0: not by count)")
	fs.Var(bytesize.Flag{P: &c.kvSnapshotBytes}, "kv-snapshot-bytes", "the key-value view saves a snapshot once the operations it applied since the last one add up to this many bytes (kv SnapshotEveryBytes; e.g. 1MiB; 0: not by size)")
	fs.DurationVar(&c.dedupWindow, "dedup-window", 0, "how long an append's ID (Idempotency-Key) is remembered (replog DedupWindow; 0: replog's default, 2m); a compaction lag is never shorter")
	fs.BoolVar(&c.compact, "compact", false, "make the default log a compacted log (replog Compaction.Enabled): below -compact-lag only the newest entry of each key (the KV's Puts and Deletes) is kept, in background passes every -compact-every; POST /compact runs one now")
	fs.DurationVar(&c.compactLag, "compact-lag", 0, "with -compact: entries younger than this are never compacted (replog Compaction.Lag, never below -dedup-window; 0: replog's default, 1h)")
	fs.DurationVar(&c.compactTombstones, "compact-tombstones", 0, "with -compact: how long a deletion marker is kept once older than the lag (replog Compaction.TombstoneRetention; 0: replog's default, 24h; negative: for ever, which the KV's create and update need to stay alike on every node)")
	fs.Var(bytesize.Flag{P: &c.compactRate}, "compact-rate", "with -compact: the bytes a pass reads per second (replog Compaction.BytesPerSecond; e.g. 1MiB; 0: replog's default, 16MiB)")
	fs.DurationVar(&c.compactEvery, "compact-every", 0, "with -compact: the time between the starts of two background passes (replog Compaction.Interval; 0: replog's default, 1m)")
	fs.DurationVar(&c.deleteTimeout, "delete-timeout", 10*time.Second, "how long POST /delete-before waits for this node's log start to move")
	fs.DurationVar(&c.voterTimeout, "voter-timeout", 30*time.Second, "how long POST /voters/add, /voters/remove and /leader/transfer wait for the change to commit (an add waits for the node to catch up; a transfer for another node to lead)")
	fs.BoolVar(&c.manualVoters, "manual-voter-changes", false, "do not make a voter whose directory was wiped a voter again automatically (replog ManualVoterChanges): it stays an observer until /voters/remove and /voters/add")
	fs.StringVar(&c.pipeline, "pipeline", "", "FROM=TO: run an exactly-once pipeline beside the node: every committed record starting with FROM is appended again with TO in its place, once (an ID derived from its offset; the position kept in the cursor -pipeline-cursor)")
	fs.StringVar(&c.pipelineCursor, "pipeline-cursor", "pipeline", "the -pipeline's cursor name, also the prefix of its outputs' IDs")
	fs.IntVar(&c.logs, "logs", 0, "named logs log-1..log-N to create at start, beside the default log (the node is a replog.Node; those another node created already are kept); each is served under /logs/NAME/ (0: none)")
	fs.IntVar(&c.nodes, "nodes", 3, "demo: the number of voters, n1..nN (1 to 9)")
	fs.IntVar(&c.spares, "spares", 1, "demo: spare nodes after the voters, observers not started until a dashboard's Start button (0 to 9)")
	fs.StringVar(&c.control, "control", "", "demo parent's control URL (set by the demo)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error, off")
	fs.DurationVar(&c.appendTimeout, "append-timeout", 10*time.Second, "how long POST /append waits for a commit")
	fs.DurationVar(&c.sampleInterval, "sample-interval", time.Millisecond, "how often the node records its status for the dashboard's step-by-step view, while a dashboard reads it (0: off)")
	fs.DurationVar(&c.sampleIdle, "sample-idle", 10*time.Second, "stop sampling once no dashboard has read the history (GET /history) for this long; the next read resumes it (0: sample always)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.logs < 0 || c.logs > maxLogs {
		return c, fmt.Errorf("-logs %d: want 0 to %d", c.logs, maxLogs)
	}
	if c.kvSnapshotEvery < 0 || c.kvSnapshotBytes < 0 {
		return c, fmt.Errorf("-kv-snapshot-every %d -kv-snapshot-bytes %d: want 0 or more", c.kvSnapshotEvery, c.kvSnapshotBytes)
	}
	if c.dedupWindow < 0 {
		return c, fmt.Errorf("-dedup-window %v: want 0 (the default) or more", c.dedupWindow)
	}
	if !c.compact && (c.compactLag != 0 || c.compactTombstones != 0 || c.compactRate != 0 || c.compactEvery != 0) {
		return c, errors.New("-compact-lag, -compact-tombstones, -compact-rate and -compact-every need -compact")
	}
	if c.compactLag < 0 || c.compactRate < 0 || c.compactEvery < 0 {
		return c, fmt.Errorf("-compact-lag %v -compact-rate %d -compact-every %v: want 0 (the default) or more", c.compactLag, c.compactRate, c.compactEvery)
	}
	if c.fetchMaxBytes < 0 || c.fetchMaxBytes > 1<<30 {
		return c, fmt.Errorf("-fetch-max-bytes %d: want 0 (the default) to 1GiB", c.fetchMaxBytes)
	}
	if c.id != "" && c.dir == "" {
		return c, errors.New("-dir is required with -id")
	}
	if c.nodes < 1 || c.nodes > 9 || c.spares < 0 || c.spares > 9 {
		return c, fmt.Errorf("-nodes %d -spares %d: want 1 to 9 voters and 0 to 9 spares", c.nodes, c.spares)
	}
	if n := countSet(c.tlsCert, c.tlsKey, c.tlsCA); n != 0 && n != 3 {
		return c, errors.New("-tls-cert, -tls-key and -tls-ca go together")
	}
	if c.id == "" && c.tlsCert != "" {
		return c, errors.New("-tls-cert is for one node (-id); the demo authenticates its nodes with a secret")
	}
	if c.pipeline != "" {
		if _, _, err := parsePipeline(c.pipeline); err != nil {
			return c, err
		}
		if c.pipelineCursor == "" || len(c.pipelineCursor) > replog.MaxIDLength-21 {
			return c, fmt.Errorf("-pipeline-cursor: 1 to %d bytes", replog.MaxIDLength-21)
		}
	}
	if c.insecure && (c.secretFile != "" || c.tlsCert != "") {
		return c, errors.New("-insecure contradicts -secret-file and -tls-cert: choose")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.id == "" {
		err = runDemo(ctx, cfg, os.Stdout, os.Stderr)
	} else {
		err = runNode(ctx, cfg, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}
