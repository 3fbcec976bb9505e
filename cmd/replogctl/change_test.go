package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/replog-io/replog/replogadmin"
	"github.com/replog-io/replog/replogtest"
)

// The change commands do what they say through a handler that allows
// changes, report the node's refusals, and are refused by a read-only
// handler with a message that says why.
func TestChangeCommands(t *testing.T) {
	l, addr := startNode(t, "/admin", replogadmin.Options{AllowChanges: true})
	ctx := context.Background()
	var offs []uint64
	for _, rec := range []string{"a", "b", "c", "d"} {
		off, err := l.Append(ctx, []byte(rec))
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	code, out, errOut := runCmd(t, "delete-before", "--addr", addr, fmt.Sprint(offs[2]))
	start := l.Status().LogStart
	if code != exitOK || start == 0 || !strings.Contains(out, fmt.Sprintf("log start %d (asked for %d", start, offs[2])) {
		t.Errorf("delete-before %d: exit %d, %q, %q; log start %d", offs[2], code, out, errOut, start)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"remove-voter", "--addr", addr, "n1"}, "last voter"},
		{[]string{"remove-voter", "--addr", addr, "ghost"}, "ghost"},
		{[]string{"transfer", "--addr", addr}, "/leader/transfer"},
	} {
		if code, _, errOut := runCmd(t, c.args...); code != exitFailure || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 mentioning %q", c.args, code, errOut, c.want)
		}
	}
	if vs := l.Status().Voters; len(vs) != 1 {
		t.Errorf("voters %+v after refused changes", vs)
	}
	for _, args := range [][]string{{"add-voter", "--addr", addr}, {"remove-voter", "--addr", addr, "a", "b"}, {"delete-before", "--addr", addr, "x"}, {"transfer", "--addr", addr, "extra"}} {
		if code, _, _ := runCmd(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}

	// A read-only handler.
	ro, roAddr := startNode(t, "/admin", replogadmin.Options{})
	before := ro.Status().LogStart
	for _, args := range [][]string{
		{"delete-before", "--addr", roAddr, "2"},
		{"remove-voter", "--addr", roAddr, "n1"},
		{"add-voter", "--addr", roAddr, "n2"},
		{"transfer", "--addr", roAddr},
	} {
		if code, out, errOut := runCmd(t, args...); code != exitFailure || out != "" || !strings.Contains(errOut, "read-only") || !strings.Contains(errOut, "AllowChanges") {
			t.Errorf("%q on a read-only handler: exit %d, %q, %q", args, code, out, errOut)
		}
	}
	if ro.Status().LogStart != before {
		t.Errorf("a read-only handler deleted entries")
	}
}

// transfer on a three-node cluster's leader moves the leadership; asked
// of a follower it fails naming the leader.
func TestTransferCommand(t *testing.T) {
	c := replogtest.NewCluster(t, 3)
	leaderID := c.Leader().Status().NodeID
	addrs := map[string]string{}
	for _, id := range c.IDs() {
		h, err := replogadmin.New(c.Node(id), replogadmin.Options{AllowChanges: true})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/admin/", http.StripPrefix("/admin", h))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		addrs[id] = srv.URL
	}
	var follower string
	for id := range addrs {
		if id != leaderID {
			follower = id
		}
	}
	if code, _, errOut := runCmd(t, "transfer", "--addr", addrs[follower]); code != exitFailure || !strings.Contains(errOut, "leader: "+leaderID) {
		t.Errorf("transfer asked of follower %s: exit %d, %q; want it to name the leader %s", follower, code, errOut, leaderID)
	}
	code, out, errOut := runCmd(t, "transfer", "--addr", addrs[leaderID], "--to", follower)
	if code != exitOK || !strings.HasPrefix(out, "leader is now n") || strings.Contains(out, "now "+leaderID+" ") {
		t.Fatalf("transfer: exit %d, %q, %q", code, out, errOut)
	}
	if id := c.WaitLeader(); id == leaderID {
		t.Errorf("%s still leads after the transfer", id)
	}
}
