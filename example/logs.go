package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogadmin"
)

// maxLogs bounds -logs: the dashboard lists every log.
const maxLogs = 100

// logHost is what the /logs routes need from a replog.Node: the list of
// its logs, and its named logs by name. nodeHost adapts a *replog.Node;
// tests use a fake. A server without one serves its one log only.
type logHost interface {
	// List is the node's logs, the default log first
	// (replogadmin.NodeLogs).
	List() replogadmin.LogsJSON
	// Log returns the named log, open on this node (replog.Node.Log's
	// errors: replog.ErrUnknownLog, replog.ErrNotReplica, replog.ErrClosed).
	Log(name string) (logNode, error)
}

// nodeHost is a *replog.Node as a logHost.
type nodeHost struct{ n *replog.Node }

func (h nodeHost) List() replogadmin.LogsJSON { return replogadmin.NodeLogs(h.n) }

func (h nodeHost) Log(name string) (logNode, error) {
	l, err := h.n.Log(name)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// logName is the i-th (from 1) of the named logs -logs creates.
func logName(i int) string { return fmt.Sprintf("log-%d", i) }

// createLogs creates log-1..log-n on node, one after another, each
// unless another node created it already, until ctx ends. Every node of
// the demo runs it: whichever proposes a name first creates it; the
// others' proposals find it taken (replog.ErrLogExists), which is what
// they want. A creation waits for a leader, so a node started before the
// others keeps trying.
func createLogs(ctx context.Context, node *replog.Node, n int, logger hclog.Logger) {
	for i := 1; i <= n; i++ {
		name := logName(i)
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := node.CreateLog(cctx, name, replog.LogOptions{})
			cancel()
			if err == nil || errors.Is(err, replog.ErrLogExists) {
				if err == nil {
					logger.Info("created a log", "log", name)
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			logger.Debug("creating a log, trying again", "log", name, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// handleLogs lists the node's logs: GET /logs answers
// replogadmin.LogsJSON (the default log first, name ""; each log's
// replicas and, where open on this node, its leader, LEO and HW).
func (s *server) handleLogs(w http.ResponseWriter, r *http.Request) {
	if s.logs == nil {
		writeJSON(w, http.StatusNotFound, apiError{Error: "this node runs one log"})
		return
	}
	writeJSON(w, http.StatusOK, s.logs.List())
}

// handleNamedLog serves /logs/{name}/ROUTE: every route of one log (the
// routes the default log has at the root: append, entries, cursors,
// status, delete-before, voter changes, transfers) for the named log
// name, open on this node. An unknown log answers 404 unknown_log; one
// this node does not hold, 404 not_replica.
func (s *server) handleNamedLog(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.logs == nil {
		writeJSON(w, http.StatusNotFound, apiError{Code: codeUnknownLog, Error: "this node runs one log: no log " + name})
		return
	}
	l, err := s.logs.Log(name)
	switch {
	case errors.Is(err, replog.ErrNotReplica):
		writeJSON(w, http.StatusNotFound, apiError{Code: codeNotReplica, Error: err.Error()})
		return
	case errors.Is(err, replog.ErrClosed):
		writeJSON(w, http.StatusServiceUnavailable, apiError{Code: codeClosed, Error: err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusNotFound, apiError{Code: codeUnknownLog, Error: err.Error()})
		return
	}
	// The same server for that log: its routes, with what belongs to the
	// node (history, metrics, admin, the list, the key-value view) left
	// out.
	c := *s
	c.node, c.hist, c.sampler, c.metrics, c.admin, c.logs, c.kv = l, nil, nil, nil, nil, nil, nil
	mux := http.NewServeMux()
	c.logRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no such endpoint of a log: " + r.URL.Path})
	})
	prefix := "/logs/" + name
	if !strings.HasPrefix(r.URL.Path, prefix) {
		// An escaped name: the mux matched the decoded path.
		writeJSON(w, http.StatusNotFound, apiError{Code: codeUnknownLog, Error: "no log " + name})
		return
	}
	http.StripPrefix(prefix, mux).ServeHTTP(w, r)
}
