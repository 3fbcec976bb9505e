package replogprom

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogtest"
)

// openNode opens a single-node Node with id and creates the named logs
// given, appending to each as many records as its count
// (replogtest.NewNode).
func openNode(t *testing.T, id string, logs map[string]int) *replog.Node {
	t.Helper()
	recs := map[string][][]byte{}
	for name, count := range logs {
		recs[name] = make([][]byte, 0, count)
		for range count {
			recs[name] = append(recs[name], []byte("x"))
		}
	}
	return replogtest.NewNode(t, id, recs, replogtest.Configure(func(_ string, o *replog.Options) { o.NoSync = false }))
}

// TestNodeCollector: two logs of one node register without collision
// (one NodeCollector, in a pedantic registry that checks every series
// against the descriptors) and their series differ by the log label,
// each with its own log's values; the default log's label stays empty;
// another node's NodeCollector and a Log's Collector share the registry.
func TestNodeCollector(t *testing.T) {
	n1 := openNode(t, "n1", map[string]int{"orders": 1, "payments": 2})
	n2 := openNode(t, "n2", map[string]int{"orders": 3})
	if _, err := n1.Default().Append(context.Background(), []byte("d")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewNodeCollector(n1)); err != nil {
		t.Fatalf("register n1's node collector: %v", err)
	}
	if err := reg.Register(NewNodeCollector(n2)); err != nil {
		t.Fatalf("register n2's node collector: %v", err)
	}
	if err := reg.Register(NewCollector(openLog(t, "n3", 4))); err != nil {
		t.Fatalf("register a Log's collector beside node collectors: %v", err)
	}
	got := gathered(t, reg)
	for key, want := range map[string]float64{
		`replog_appends_total{log="",node="n1"}`:              1,
		`replog_appends_total{log="orders",node="n1"}`:        1,
		`replog_appends_total{log="payments",node="n1"}`:      2,
		`replog_appends_total{log="",node="n2"}`:              0,
		`replog_appends_total{log="orders",node="n2"}`:        3,
		`replog_appends_total{log="",node="n3"}`:              4,
		`replog_node_open_logs{node="n1"}`:                    2,
		`replog_node_open_logs{node="n2"}`:                    1,
		`replog_role{log="payments",node="n1",role="leader"}`: 1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	// Every log's series: the same set of names per log.
	perLog := map[string]int{}
	for key := range got {
		for _, log := range []string{`log="orders",node="n1"`, `log="payments",node="n1"`, `log="",node="n1"`} {
			if strings.Contains(key, log) {
				perLog[log]++
			}
		}
	}
	if perLog[`log="orders",node="n1"`] == 0 || perLog[`log="orders",node="n1"`] != perLog[`log="payments",node="n1"`] {
		t.Errorf("series per log of n1: %v, want as many for orders as for payments", perLog)
	}

	// A deleted log's series go with it, with no registration.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n1.DeleteLog(ctx, "payments"); err != nil {
		t.Fatal(err)
	}
	got = gathered(t, reg)
	if _, ok := got[`replog_appends_total{log="payments",node="n1"}`]; ok {
		t.Error("a deleted log's series are still scraped")
	}
	if v := got[`replog_appends_total{log="orders",node="n1"}`]; v != 1 {
		t.Errorf("orders' appends after payments' deletion = %v, want 1", v)
	}
}
