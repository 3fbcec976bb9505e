package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/replog-io/replog"
)

// forwardedHeader marks a /leader/transfer request one node forwarded to
// the leader it knows: the receiver does not forward it again (if it no
// longer leads, it answers 503 naming the leader it knows), so two nodes
// with stale views cannot bounce a request between them.
const forwardedHeader = "X-Replog-Forwarded-By"

// transferJSON is /leader/transfer's answer.
type transferJSON struct {
	// Leader is the node that leads once the transfer is done: To, or,
	// if To lost its election (or none was named), whoever won.
	Leader string `json:"leader"`
	// From is the node that led and handed over; To the successor asked
	// for ("": the most caught-up voter).
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	// Unchanged is true when To already led: nothing was done.
	Unchanged bool `json:"unchanged,omitempty"`
	// Via is the node that received the request, when it forwarded it to
	// the leader (From).
	Via string `json:"via,omitempty"`
}

// handleTransfer serves POST /leader/transfer?to=ID: replog's
// TransferLeadership, which must run on the leader, from any node. A node
// that does not lead forwards the request to the leader it knows (its
// -http-peers URL) and relays the answer; without a URL for it, it
// answers 503 naming the leader. It waits at most voterTimeout.
func (s *server) handleTransfer(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("to")
	ctx, cancel := context.WithTimeout(r.Context(), s.voterTimeout)
	defer cancel()
	if to == s.self && s.node.Status().Role == replog.RoleLeader {
		writeJSON(w, http.StatusOK, transferJSON{Leader: to, From: to, To: to, Unchanged: true})
		return
	}
	err := s.node.TransferLeadership(ctx, to)
	// -voter-timeout may exceed the server's WriteTimeout.
	extend(http.NewResponseController(w))
	if err == nil {
		writeJSON(w, http.StatusOK, transferJSON{Leader: s.node.Status().LeaderID, From: s.self, To: to})
		return
	}
	var notLeader *replog.NotLeaderError
	if errors.As(err, &notLeader) && ctx.Err() == nil && r.Header.Get(forwardedHeader) == "" {
		leader := notLeader.LeaderID
		if leader != "" && leader == to {
			writeJSON(w, http.StatusOK, transferJSON{Leader: to, From: to, To: to, Unchanged: true})
			return
		}
		if u := s.urlOf(leader); u != "" && leader != s.self {
			s.forwardTransfer(ctx, w, u, to)
			return
		}
	}
	code, body := s.transferError(err)
	s.logger.Debug("leadership transfer failed", "to", to, "status", code, "error", err)
	writeJSON(w, code, body)
}

// forwardTransfer sends the transfer to the leader's HTTP API at base and
// relays its answer (status and body), marking the request as forwarded.
func (s *server) forwardTransfer(ctx context.Context, w http.ResponseWriter, base, to string) {
	target := base + "/leader/transfer"
	if to != "" {
		target += "?to=" + url.QueryEscape(to)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "forwarding to the leader: " + err.Error()})
		return
	}
	req.Header.Set(forwardedHeader, s.self)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		code := http.StatusBadGateway
		if ctx.Err() != nil {
			code = http.StatusGatewayTimeout
		}
		writeJSON(w, code, apiError{Error: "forwarding to the leader at " + base + ": " + err.Error()})
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		writeJSON(w, http.StatusBadGateway, apiError{Error: "reading the leader's answer: " + err.Error()})
		return
	}
	if resp.StatusCode == http.StatusOK {
		var tj transferJSON
		if json.Unmarshal(body, &tj) == nil {
			tj.Via = s.self
			writeJSON(w, http.StatusOK, tj)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// transferError maps a TransferLeadership error to a status code and body.
func (s *server) transferError(err error) (int, apiError) {
	body := apiError{Error: err.Error()}
	var notLeader *replog.NotLeaderError
	switch {
	case errors.Is(err, replog.ErrNoSuccessor), errors.Is(err, replog.ErrTransferInProgress):
		// Nothing changed: the node named is no other voter (or none
		// fetches), or another transfer is under way.
		return http.StatusConflict, body
	case errors.Is(err, replog.ErrTransferTimedOut):
		// The successor did not catch up; the leader leads on.
		return http.StatusGatewayTimeout, body
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The transfer may still complete.
		return http.StatusGatewayTimeout, body
	case errors.As(err, &notLeader):
		body.Leader = notLeader.LeaderID
		body.LeaderURL = s.urlOf(notLeader.LeaderID)
		return http.StatusServiceUnavailable, body
	case errors.Is(err, replog.ErrClosed):
		return http.StatusServiceUnavailable, body
	default:
		// ErrStorageFailed, ErrCommittedTruncation or anything unforeseen.
		return http.StatusInternalServerError, body
	}
}
