package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
)

// historySize bounds the status changes a node keeps for the dashboard.
const historySize = 512

// maxRecordSize is replog's default Options.MaxRecordSize: larger bodies
// are refused before they reach the Log.
const maxRecordSize = 1 << 20

// runNode runs one node until ctx ends (SIGINT/SIGTERM), then shuts down:
// HTTP first (ending streaming reads), then the Log.
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
	// A file left by an earlier run must not point anyone at a dead port.
	if err := os.Remove(addrFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	defer ln.Close()

	log, err := replog.Open(replog.Options{
		Dir:              cfg.dir,
		NodeID:           cfg.id,
		ClusterID:        cfg.cluster,
		Voters:           cfg.voters,
		RPCAddr:          cfg.rpcAddr,
		AdvertiseRPCAddr: cfg.rpcAdvertise,
		Peers:            cfg.peers,
		GossipAddr:       cfg.gossipAddr,
		Join:             cfg.join,
		FetchMaxWait:     cfg.fetchMaxWait,
		FetchTimeout:     cfg.fetchTimeout,
		ElectionTimeout:  cfg.electionTimeout,
		NoSync:           cfg.nosync,
		Logger:           logger.Named("replog"),
	})
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() {
		if err := log.Close(); err != nil {
			logger.Error("closing the log", "error", err)
		}
	}()

	hist := newHistory(historySize)
	if cfg.sampleInterval > 0 {
		stopSampling := sample(log, hist, cfg.sampleInterval)
		defer stopSampling()
	} else {
		hist = nil
	}

	s := &server{
		node:          log,
		self:          cfg.id,
		selfURL:       "http://" + ln.Addr().String(),
		peers:         cfg.httpPeers,
		voters:        cfg.voters,
		control:       cfg.control,
		appendTimeout: cfg.appendTimeout,
		maxRecord:     maxRecordSize,
		hist:          hist,
		logger:        logger.Named("http"),
	}
	// Streaming reads (follow=true) never end on their own: cancelling the
	// base context ends them so Shutdown can finish.
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
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

// writeFileAtomic writes data to path via a rename, so readers never see a
// partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
