package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
	"github.com/replog-io/replog/replogadmin"
	"github.com/replog-io/replog/replogprom"
)

// historySize bounds the status changes a node keeps for the dashboard.
const historySize = 512

// defaultKVSnapshotEvery is -kv-snapshot-every's default: how many
// operations the key-value view applies between its snapshots.
const defaultKVSnapshotEvery = 1000

// maxRecordSize is replog's default Options.MaxRecordSize: larger bodies
// are refused before they reach the Log.
const maxRecordSize = replog.DefaultMaxRecordSize

// runNode runs one node until ctx ends (SIGINT/SIGTERM), then shuts down:
// HTTP first (ending streaming reads), then the Node and its logs.
func runNode(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logger := hclog.New(&hclog.LoggerOptions{
		Name:   cfg.id,
		Level:  hclog.LevelFromString(cfg.logLevel),
		Output: stderr,
	})
	if cfg.logLevel == "off" {
		logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return err
	}
	addrFile := filepath.Join(cfg.dir, "http.addr")

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	defer ln.Close()

	opts := replog.Options{
		Dir:                 cfg.dir,
		NodeID:              cfg.id,
		ClusterID:           cfg.cluster,
		Voters:              cfg.voters,
		RPCAddr:             cfg.rpcAddr,
		AdvertiseRPCAddr:    cfg.rpcAdvertise,
		Peers:               cfg.peers,
		GossipAddr:          cfg.gossipAddr,
		Join:                cfg.join,
		FetchMaxWait:        cfg.fetchMaxWait,
		FetchTimeout:        cfg.fetchTimeout,
		ElectionTimeout:     cfg.electionTimeout,
		RetentionBytes:      cfg.retentionBytes,
		RetentionAge:        cfg.retentionAge,
		RetainUntilSnapshot: cfg.retainUntilSnapshot,
		FetchMaxBytes:       int(cfg.fetchMaxBytes),
		DedupWindow:         cfg.dedupWindow,
		Compaction:          compaction(cfg),
		SegmentBytes:        cfg.segmentBytes,
		NoSync:              cfg.nosync,
		ManualVoterChanges:  cfg.manualVoters,
		Logger:              logger.Named("replog"),
	}
	if err := applyAuth(cfg, &opts); err != nil {
		return err
	}
	node, err := replog.OpenNode(opts)
	if err != nil {
		if errors.Is(err, replog.ErrInvalidOptions) && cfg.secretFile == "" && cfg.tlsCert == "" && !cfg.insecure {
			return fmt.Errorf("open log: %w (flags: -secret-file, or -tls-cert/-tls-key/-tls-ca, or -insecure)", err)
		}
		return fmt.Errorf("open log: %w", err)
	}
	// Only now that this process holds the directory (Open locks it) is
	// a file left by an earlier run its to remove: a second process
	// refused above must not hide a live node's address.
	if err := os.Remove(addrFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = node.Close()
		return err
	}
	defer func() {
		if err := node.Close(); err != nil {
			logger.Error("closing the node", "error", err)
		}
	}()
	log := node.Default()
	if cfg.logs > 0 {
		cctx, stopCreating := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			createLogs(cctx, node, cfg.logs, logger.Named("logs"))
		}()
		// Deferred after the Node's Close: runs before it.
		defer func() {
			stopCreating()
			<-done
		}()
	}

	hist := newHistory(historySize)
	var smp *sampler
	if cfg.sampleInterval > 0 {
		smp = startSampler(log, hist, cfg.sampleInterval, cfg.sampleIdle)
		defer smp.stop()
	} else {
		hist = nil
	}

	// Read-only: the example's own API already serves the changes.
	admin, err := replogadmin.NewNode(node, replogadmin.Options{})
	if err != nil {
		return err
	}
	// The KV logs only failed snapshots (Warn) and skipped entries (Debug).
	kvLogger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The key-value view (/kv/), kept running by kvHost (kvhost.go): its
	// state is snapshotted every -kv-snapshot-every operations. Without
	// -retain-until-snapshot, retention may delete what a restarted
	// node's KV needs: the node then serves the log without it.
	store := startKV(log, kv.Options{SnapshotEveryEntries: cfg.kvSnapshotEvery, SnapshotEveryBytes: cfg.kvSnapshotBytes, Logger: kvLogger}, logger.Named("kv"))
	// Deferred after the Node's Close: runs before it.
	defer store.stop()
	s := &server{
		node:          log,
		kv:            store,
		logs:          nodeHost{node},
		self:          cfg.id,
		selfURL:       "http://" + ln.Addr().String(),
		peers:         cfg.httpPeers,
		voters:        cfg.voters,
		control:       cfg.control,
		appendTimeout: cfg.appendTimeout,
		deleteTimeout: cfg.deleteTimeout,
		voterTimeout:  cfg.voterTimeout,
		maxRecord:     maxRecordSize,
		hist:          hist,
		sampler:       smp,
		metrics:       metricsHandler(node, logger.Named("metrics")),
		admin:         admin,
		logger:        logger.Named("http"),
	}
	if cfg.pipeline != "" {
		from, to, _ := parsePipeline(cfg.pipeline) // checked by parseFlags
		p := &pipeline{log: log, from: []byte(from), to: []byte(to), cursor: cfg.pipelineCursor,
			logger: logger.Named("pipeline"), retry: 200 * time.Millisecond}
		pctx, stopPipeline := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.run(pctx)
		}()
		// Deferred after the Log's Close: runs before it.
		defer func() {
			stopPipeline()
			<-done
		}()
	}

	// Streaming reads (follow=true) never end on their own: cancelling the
	// base context ends them so Shutdown can finish.
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := newHTTPServer(s.handler(), logger.Named("http"))
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	// Announce the address only now that the Log is open and the server
	// is serving: whoever reads it can use it at once.
	addr := ln.Addr().String()
	if err := writeFileAtomic(addrFile, []byte(addr+"\n")); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "http=%s\n", addr)
	logger.Info("serving", "http", addr, "dashboard", s.selfURL+"/")

	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case serveErr = <-served:
	}
	cancelBase()
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		logger.Warn("http shutdown", "error", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// metricsHandler serves the metrics of node's logs (replogprom, labelled
// by log), the Go runtime's and the process's, from a registry of its own.
func metricsHandler(node *replog.Node, logger hclog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		replogprom.NewNodeCollector(node),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	})
}

// Limits of the HTTP servers (nodes and the demo's control API), so that
// a slow or idle client cannot hold a connection or a goroutine forever.
// The /entries follow stream outlives writeTimeout: it moves its write
// deadline forward before each write (see handleEntries).
const (
	readHeaderTimeout = 5 * time.Second
	// readTimeout covers the whole request, body included: an append body
	// is at most 1 MiB.
	readTimeout    = 30 * time.Second
	writeTimeout   = 30 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 64 << 10
)

// newHTTPServer returns a server for h with the limits above.
func newHTTPServer(h http.Handler, logger hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}

// writeFileAtomic writes data to path via a rename, so readers never see a
// partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
