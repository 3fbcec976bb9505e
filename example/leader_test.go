package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog"
)

// /leader/transfer on the leader calls TransferLeadership with the
// successor named, bounded by -voter-timeout, answers the new leader, and
// maps the errors: nothing changed (no such successor, another transfer)
// is 409, a successor that did not catch up or a timeout 504, closed 503,
// a failed disk 500.
func TestLeaderTransfer(t *testing.T) {
	deadline := context.DeadlineExceeded
	tests := []struct {
		name, target string
		err          error
		code         int
		wantMsg      string
	}{
		{"to a voter", "/leader/transfer?to=n2", nil, 200, ""},
		{"to the most caught-up", "/leader/transfer", nil, 200, ""},
		{"not another voter", "/leader/transfer?to=n9", fmt.Errorf("replog: transfer leadership: %w: n9", replog.ErrNoSuccessor), 409, "no voter to hand"},
		{"another transfer", "/leader/transfer?to=n2", fmt.Errorf("replog: transfer leadership: %w", replog.ErrTransferInProgress), 409, "in progress"},
		{"successor behind", "/leader/transfer?to=n2", fmt.Errorf("replog: transfer leadership: %w", replog.ErrTransferTimedOut), 504, "timed out"},
		{"timeout", "/leader/transfer?to=n2", fmt.Errorf("replog: transfer leadership: %w", deadline), 504, "deadline"},
		{"closed", "/leader/transfer?to=n2", replog.ErrClosed, 503, "closed"},
		{"disk failure", "/leader/transfer?to=n2", fmt.Errorf("%w: disk on fire", replog.ErrStorageFailed), 500, "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeNode()
			f.status.Role, f.status.LeaderID = replog.RoleLeader, "n1"
			f.transferErr = tt.err
			rec := do(t, newTestServer(f).handler(), "POST", tt.target, "")
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d (body %s)", rec.Code, tt.code, rec.Body)
			}
			_, to, _ := strings.Cut(tt.target, "?to=")
			if len(f.transferGot) != 1 || f.transferGot[0] != to {
				t.Fatalf("calls %q, want one transfer to %q", f.transferGot, to)
			}
			if dl, ok := f.transferCtxs[0].Deadline(); !ok || time.Until(dl) > 5*time.Second {
				t.Errorf("the transfer's context has no -voter-timeout deadline (%v, %v)", dl, ok)
			}
			if tt.err != nil {
				if msg, _ := decodeJSON(t, rec)["error"].(string); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("error %q does not mention %q", msg, tt.wantMsg)
				}
				return
			}
			var got transferJSON
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want := transferJSON{Leader: f.Status().LeaderID, From: "n1", To: to}
			if got != want || got.Leader == "n1" {
				t.Errorf("answer %+v, want %+v", got, want)
			}
		})
	}
}

// A node that does not lead forwards /leader/transfer to the leader it
// knows (its -http-peers URL) and relays the answer; a forwarded request
// is not forwarded again; without a URL for the leader it answers 503
// naming it; asking to make the leader the leader changes nothing.
func TestLeaderTransferThroughAFollower(t *testing.T) {
	leader := newFakeNode()
	leader.status.NodeID, leader.status.Role, leader.status.LeaderID = "n2", replog.RoleLeader, "n2"
	ls := newTestServer(leader)
	ls.self = "n2"
	srv := httptest.NewServer(ls.handler())
	defer srv.Close()

	follower := newFakeNode() // n1, following n2
	follower.transferErr = &replog.NotLeaderError{LeaderID: "n2"}
	fs := newTestServer(follower)
	fs.peers["n2"] = srv.URL
	h := fs.handler()

	rec := do(t, h, "POST", "/leader/transfer?to=n3", "")
	var got transferJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("through the follower: %d %s (%v)", rec.Code, rec.Body, err)
	}
	if want := (transferJSON{Leader: "n3", From: "n2", To: "n3", Via: "n1"}); got != want {
		t.Errorf("answer %+v, want %+v", got, want)
	}
	if !slices.Equal(leader.transferGot, []string{"n3"}) || !slices.Equal(follower.transferGot, []string{"n3"}) {
		t.Errorf("leader's calls %q, follower's %q: want one transfer to n3 on each (the follower's refused)", leader.transferGot, follower.transferGot)
	}

	// The leader's refusal is relayed as it is.
	leader.transferErr = fmt.Errorf("replog: transfer leadership: %w", replog.ErrTransferInProgress)
	if rec := do(t, h, "POST", "/leader/transfer?to=n3", ""); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "in progress") {
		t.Errorf("a refusal through the follower: %d %s, want 409", rec.Code, rec.Body)
	}

	// A forwarded request that reaches a node that does not lead is
	// answered there: 503 with the leader it knows.
	req := httptest.NewRequest("POST", "/leader/transfer?to=n3", nil)
	req.Header.Set(forwardedHeader, "n3")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if m := decodeJSON(t, rec); rec.Code != http.StatusServiceUnavailable || m["leader"] != "n2" || m["leader_url"] != srv.URL {
		t.Errorf("a forwarded request at a follower: %d %s, want 503 naming n2", rec.Code, rec.Body)
	}
	if len(leader.transferGot) != 2 {
		t.Errorf("the forwarded request went on to the leader: %q", leader.transferGot)
	}

	// Making the leader the leader: done, nothing forwarded.
	rec = do(t, h, "POST", "/leader/transfer?to=n2", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || !got.Unchanged || got.Leader != "n2" {
		t.Errorf("to=the leader: %d %s, want 200 unchanged", rec.Code, rec.Body)
	}
	leader.mu.Lock()
	leader.status.Role, leader.status.LeaderID = replog.RoleLeader, "n2" // the transfer above moved it
	leader.mu.Unlock()
	lrec := do(t, ls.handler(), "POST", "/leader/transfer?to=n2", "")
	if err := json.Unmarshal(lrec.Body.Bytes(), &got); err != nil || lrec.Code != http.StatusOK || !got.Unchanged {
		t.Errorf("to=itself on the leader: %d %s, want 200 unchanged", lrec.Code, lrec.Body)
	}
	if len(leader.transferGot) != 2 {
		t.Errorf("the leader was asked to transfer to itself: %q", leader.transferGot)
	}

	// No URL for the leader: 503 naming it.
	delete(fs.peers, "n2")
	rec = do(t, fs.handler(), "POST", "/leader/transfer?to=n3", "")
	if m := decodeJSON(t, rec); rec.Code != http.StatusServiceUnavailable || m["leader"] != "n2" {
		t.Errorf("no URL for the leader: %d %s, want 503 naming n2", rec.Code, rec.Body)
	}
}
