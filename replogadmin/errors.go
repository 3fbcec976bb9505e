package replogadmin

import (
	"context"
	"errors"
	"net/http"

	"github.com/replog-io/replog"
)

// Error codes of the API (apiError.Code): what a client program switches
// on, beside the HTTP status (the package doc lists which goes with
// which).
const (
	codeBadRequest       = "bad_request"
	codeReadOnly         = "read_only"
	codeCrossOrigin      = "cross_origin"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeOutOfRange       = "out_of_range"
	codeNotLeader        = "not_leader"
	codeNoLeader         = "no_leader"
	codeUnknownNode      = "unknown_node"
	codeUnknownLog       = "unknown_log"
	codeNotReplica       = "not_replica"
	codeLastVoter        = "last_voter"
	codeChangeInProgress = "change_in_progress"
	codeNotCaughtUp      = "not_caught_up"
	codeNoSuccessor      = "no_successor"
	codeTransferBusy     = "transfer_in_progress"
	codeTransferTimedOut = "transfer_timed_out"
	codeUnknownOutcome   = "unknown_outcome"
	codeTimeout          = "timeout"
	codeClosed           = "closed"
	codeStorageFailed    = "storage_failed"
	codeHalted           = "halted"
	codeCorrupt          = "corrupt"
	codeInternal         = "internal"
)

// apiError is the JSON body of every error answer.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Leader is the leader the node knows, on not_leader errors.
	Leader string `json:"leader,omitempty"`
	// LogStart is where the node's log starts, on out_of_range errors
	// (the offset to resume from) and on /delete-before's errors.
	LogStart *uint64 `json:"log_start,omitempty"`
	// Replicas are the nodes that hold the log, on not_replica errors.
	Replicas []string `json:"replicas,omitempty"`
}

func writeError(w http.ResponseWriter, code int, body apiError) {
	writeJSON(w, code, body)
}

// notLeader is the body of a request that only the leader can answer.
func notLeader(self, leader, why string) apiError {
	msg := "node " + self + " is not the leader"
	if leader != "" {
		msg += " (the leader is " + leader + ")"
	} else {
		msg += " and knows no leader now"
	}
	return apiError{Code: codeNotLeader, Leader: leader, Error: msg + ": " + why}
}

// errorStatus maps an error of a Log method to a status and body. The
// order matters: one error may wrap several sentinels (a voter change
// that waited for another wraps ErrVoterChangeInProgress and the
// context's error), and the most specific one says best what happened.
func errorStatus(err error) (int, apiError) {
	body := apiError{Error: err.Error()}
	var nl *replog.NotLeaderError
	table := []struct {
		is     bool
		status int
		code   string
	}{
		{errors.Is(err, replog.ErrStorageFailed), http.StatusInternalServerError, codeStorageFailed},
		{errors.Is(err, replog.ErrCommittedTruncation), http.StatusInternalServerError, codeHalted},
		{errors.Is(err, replog.ErrCorrupt), http.StatusInternalServerError, codeCorrupt},
		{errors.Is(err, replog.ErrUnknownOutcome), http.StatusGatewayTimeout, codeUnknownOutcome},
		{errors.Is(err, replog.ErrInvalidArgument), http.StatusBadRequest, codeBadRequest},
		{errors.Is(err, replog.ErrLastVoter), http.StatusConflict, codeLastVoter},
		{errors.Is(err, replog.ErrNoSuccessor), http.StatusConflict, codeNoSuccessor},
		{errors.Is(err, replog.ErrTransferInProgress), http.StatusConflict, codeTransferBusy},
		{errors.Is(err, replog.ErrTransferTimedOut), http.StatusGatewayTimeout, codeTransferTimedOut},
		{errors.Is(err, replog.ErrVoterChangeInProgress), http.StatusConflict, codeChangeInProgress},
		{errors.Is(err, replog.ErrNotCaughtUp), http.StatusGatewayTimeout, codeNotCaughtUp},
		{errors.Is(err, replog.ErrUnknownNode), http.StatusNotFound, codeUnknownNode},
		{errors.As(err, &nl) && nl.LeaderID == "", http.StatusServiceUnavailable, codeNoLeader},
		{errors.As(err, &nl), http.StatusConflict, codeNotLeader},
		{errors.Is(err, replog.ErrNoLeader), http.StatusServiceUnavailable, codeNoLeader},
		{errors.Is(err, replog.ErrClosed), http.StatusServiceUnavailable, codeClosed},
		{errors.Is(err, replog.ErrOutOfRange), http.StatusRequestedRangeNotSatisfiable, codeOutOfRange},
		{errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), http.StatusGatewayTimeout, codeTimeout},
	}
	for _, row := range table {
		if row.is {
			body.Code = row.code
			if row.code == codeNotLeader {
				body.Leader = nl.LeaderID
			}
			return row.status, body
		}
	}
	body.Code = codeInternal
	return http.StatusInternalServerError, body
}
