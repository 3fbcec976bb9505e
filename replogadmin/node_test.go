package replogadmin

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/testnode"
	"github.com/replog-io/replog/protocol"
)

// openNodes opens n Nodes, n1..nN, voters of one cluster with static
// peers on loopback ports picked up front, and test timings.
func openNodes(t *testing.T, n int) map[string]*replog.Node {
	t.Helper()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	var ids []string
	peers := map[string]string{}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers[id] = ln.Addr().String()
		_ = ln.Close()
		ids = append(ids, id)
	}
	nodes := map[string]*replog.Node{}
	for _, id := range ids {
		nd, err := replog.OpenNode(replog.Options{
			Dir: t.TempDir(), NodeID: id, Voters: ids, RPCAddr: peers[id], Peers: peers, Secret: secret, NoSync: true,
			FetchMaxWait: testnode.FetchMaxWait, FetchTimeout: testnode.FetchTimeout, ElectionTimeout: testnode.ElectionTimeout,
			Logger: testnode.Logger(),
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = nd
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			go nd.Close()
		}
		for _, nd := range nodes {
			_ = nd.Close()
		}
	})
	return nodes
}

// serveNode mounts the handler of node n under /admin/.
func serveNode(t *testing.T, n *replog.Node, opts Options) string {
	t.Helper()
	h, err := NewNode(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/admin"
}

// TestNode: a Node's handler lists its logs with each one's replicas and,
// where open, leader, LEO and HW; serves every route for a named log
// under /logs/NAME/ (its own entries and status, not the default log's);
// keeps the default log's routes at the root; answers unknown_log and
// not_replica for logs it cannot serve; and stays read-only by default
// for the named logs' changes too.
func TestNode(t *testing.T) {
	nodes := openNodes(t, 3)
	n1 := nodes["n1"]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for n1.Default().Status().FeatureLevel < protocol.FeatureLevelNamedLogs {
		if ctx.Err() != nil {
			t.Fatal("the named logs' feature level was not raised")
		}
		time.Sleep(10 * time.Millisecond)
	}
	orders, err := n1.CreateLog(ctx, "orders", replog.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A log on one replica: two of the three nodes do not hold it.
	if _, err := n1.CreateLog(ctx, "solo", replog.LogOptions{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b"} {
		if _, err := orders.Append(ctx, []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	url := serveNode(t, n1, Options{})

	var ls LogsJSON
	var byName map[string]LogJSON
	deadline := time.Now().Add(30 * time.Second)
	for {
		ls = LogsJSON{}
		if code, body := call(t, "GET", url+"/logs", &ls); code != 200 {
			t.Fatalf("GET /logs: %d %s", code, body)
		}
		byName = map[string]LogJSON{}
		for _, l := range ls.Logs {
			byName[l.Name] = l
		}
		if o := byName["orders"]; o.LeaderID != "" && o.HW >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /logs: orders never had a leader and its appends committed: %+v", ls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ls.NodeID != "n1" || len(ls.Logs) != 3 || ls.Logs[0].Name != "" || ls.Logs[1].Name != "orders" || ls.Logs[2].Name != "solo" {
		t.Fatalf("GET /logs: %+v, want the default log, orders, solo", ls)
	}
	if d := byName[""]; len(d.Replicas) != 3 || !d.Open || d.LeaderID == "" {
		t.Errorf("the default log: %+v, want 3 replicas, open, a leader", d)
	}
	o := byName["orders"]
	if len(o.Replicas) != 3 || !o.Local || !o.Open || o.LEO < o.HW || o.PreferredLeader == "" {
		t.Errorf("orders: %+v", o)
	}
	solo := byName["solo"]
	if len(solo.Replicas) != 1 {
		t.Fatalf("solo: %+v, want one replica", solo)
	}

	// A named log's routes serve that log.
	var page PageJSON
	if code, body := call(t, "GET", url+"/logs/orders/entries", &page); code != 200 || len(page.Entries) != 2 || string(page.Entries[0].Data) != "a" {
		t.Fatalf("GET /logs/orders/entries: %d %s", code, body)
	}
	page = PageJSON{}
	if code, body := call(t, "GET", url+"/entries", &page); code != 200 || len(page.Entries) != 0 {
		t.Fatalf("GET /entries (the default log, never appended to): %d %s", code, body)
	}
	var st replog.Status
	if code, body := call(t, "GET", url+"/logs/orders/status", &st); code != 200 || st.NodeID != "n1" || st.LEO < 2 {
		t.Fatalf("GET /logs/orders/status: %d %s", code, body)
	}
	var vs VotersJSON
	if code, body := call(t, "GET", url+"/logs/orders/voters", &vs); code != 200 || len(vs.Voters) != 3 {
		t.Fatalf("GET /logs/orders/voters: %d %s", code, body)
	}
	var idx indexJSON
	if code, body := call(t, "GET", url+"/logs/orders/", &idx); code != 200 || len(idx.Routes) == 0 {
		t.Fatalf("GET /logs/orders/: %d %s", code, body)
	}

	wantError(t, "GET", url+"/logs/nosuch/status", 404, codeUnknownLog)
	wantError(t, "GET", url+"/logs/orders/nosuch", 404, codeNotFound)
	wantError(t, "POST", url+"/logs/orders/leader/transfer", 403, codeReadOnly)
	// Served by a node that does not hold solo: not_replica, naming its
	// replica.
	for id, nd := range nodes {
		if slices.Contains(solo.Replicas, id) {
			continue
		}
		e := wantError(t, "GET", serveNode(t, nd, Options{})+"/logs/solo/status", 404, codeNotReplica)
		if !slices.Equal(e.Replicas, solo.Replicas) {
			t.Errorf("not_replica from %s: replicas %v, want %v", id, e.Replicas, solo.Replicas)
		}
		break
	}
	// A Log's handler has no /logs.
	wantError(t, "GET", serve(t, orders, Options{})+"/logs", 404, codeNotFound)

	if _, err := NewNode(nil, Options{}); err == nil {
		t.Error("NewNode(nil) succeeded")
	}
}
