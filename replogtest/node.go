package replogtest

import (
	"context"
	"slices"

	"github.com/replog-io/replog"
)

// NewNode opens a single-node replog.Node with id in a data directory
// from t.TempDir (ClusterID, NoSync, no peers, no gossip), creates the
// named logs given, in name order, and appends each one's records to it,
// one Append a record. Configure options adjust the Options before the
// Node opens; the Timeout option bounds the creations and appends (default
// DefaultTimeout). It returns once every record is committed;
// t.Cleanup closes the Node. Any failure fails the test.
func NewNode(t TB, id string, logs map[string][][]byte, opts ...Option) *replog.Node {
	t.Helper()
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	o := replog.Options{NodeID: id, ClusterID: ClusterID, Dir: t.TempDir(), NoSync: true}
	for _, f := range cfg.configure {
		f(id, &o)
	}
	n, err := replog.OpenNode(o)
	if err != nil {
		t.Fatalf("replogtest: open node %s: %v", id, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	names := make([]string, 0, len(logs))
	for name := range logs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		l, err := n.CreateLog(ctx, name, replog.LogOptions{})
		if err != nil {
			t.Fatalf("replogtest: node %s: create log %q: %v", id, name, err)
		}
		for _, r := range logs[name] {
			if _, err := l.Append(ctx, r); err != nil {
				t.Fatalf("replogtest: node %s: append to %q: %v", id, name, err)
			}
		}
	}
	return n
}
