package replogadmin

import (
	"errors"
	"net/http"
	"slices"

	"github.com/replog-io/replog"
)

// LogsJSON is GET /logs's answer (a Node's handler): the default log,
// then every named log of the node's catalog, sorted by name.
type LogsJSON struct {
	// NodeID is the node that answered: Open, Role, LeaderID and the
	// offsets are as it sees them.
	NodeID string    `json:"node_id"`
	Logs   []LogJSON `json:"logs"`
}

// LogJSON is one log of GET /logs.
type LogJSON struct {
	// Name is the log's name, "" for the default log (which every node
	// runs: its replicas are its voters in force).
	Name string `json:"name"`
	// Replicas are the nodes that hold it; PreferredLeader the one the
	// Node's balancer moves its leadership to (none for the default log).
	Replicas        []string `json:"replicas"`
	PreferredLeader string   `json:"preferred_leader,omitempty"`
	// Local says whether the answering node is one of its replicas, Open
	// whether it is open there now. The fields below are known only
	// where it is open (absent otherwise).
	Local bool `json:"local"`
	Open  bool `json:"open"`
	// Role is the answering node's role in the log; LeaderID the leader
	// it knows ("" for none); Epoch the log's leader epoch there.
	Role     replog.Role `json:"role,omitempty"`
	LeaderID string      `json:"leader_id,omitempty"`
	Epoch    uint64      `json:"epoch,omitempty"`
	// LEO, HW (the high watermark) and LogStart as the answering node
	// holds them.
	LEO      uint64 `json:"leo"`
	HW       uint64 `json:"hw"`
	LogStart uint64 `json:"log_start"`
}

func (h *Handler) serveLogs(w http.ResponseWriter, r *http.Request, _ *replog.Log) {
	writeJSON(w, http.StatusOK, NodeLogs(h.node))
}

// NodeLogs is n's GET /logs answer: the default log, then every named
// log of n's catalog, each with its state on n where open there. For
// services that show the list in their own API or dashboard.
func NodeLogs(n *replog.Node) LogsJSON {
	st := n.Default().Status()
	def := logJSON(LogJSON{Local: true, Open: true}, st)
	for _, v := range st.Voters {
		def.Replicas = append(def.Replicas, v.ID)
	}
	out := LogsJSON{NodeID: st.NodeID, Logs: []LogJSON{def}}
	for _, li := range n.Logs() {
		lj := LogJSON{Name: li.Name, Replicas: slices.Clone(li.Replicas), PreferredLeader: li.PreferredLeader, Local: li.Local, Open: li.Open}
		if li.Open {
			if l, err := n.Log(li.Name); err == nil {
				lj = logJSON(lj, l.Status())
			} else {
				lj.Open = false // closed since the listing
			}
		}
		out.Logs = append(out.Logs, lj)
	}
	return out
}

// logJSON fills lj's state from st.
func logJSON(lj LogJSON, st replog.Status) LogJSON {
	lj.Role, lj.LeaderID, lj.Epoch = st.Role, st.LeaderID, st.Epoch
	lj.LEO, lj.HW, lj.LogStart = st.LEO, st.HighWatermark, st.LogStart
	return lj
}

// namedLog returns the named log name open on the handler's node, or
// nil and the error answer: 404 unknown_log if the catalog does not hold
// it (or it is not open here yet), 404 not_replica if it lives on other
// nodes (named in "replicas"), 503 closed after the node's Close.
func (h *Handler) namedLog(name string) (*replog.Log, int, apiError) {
	if name == "" {
		return nil, http.StatusNotFound, apiError{Code: codeUnknownLog, Error: "no log named: /logs/NAME/... (the default log's routes are at the root)"}
	}
	l, err := h.node.Log(name)
	switch {
	case err == nil:
		return l, 0, apiError{}
	case errors.Is(err, replog.ErrNotReplica):
		body := apiError{Code: codeNotReplica, Error: err.Error()}
		for _, li := range h.node.Logs() {
			if li.Name == name {
				body.Replicas = li.Replicas
			}
		}
		return nil, http.StatusNotFound, body
	case errors.Is(err, replog.ErrUnknownLog):
		return nil, http.StatusNotFound, apiError{Code: codeUnknownLog, Error: err.Error()}
	}
	status, body := errorStatus(err)
	return nil, status, body
}
