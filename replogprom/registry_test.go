package replogprom

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replog-io/replog"
)

// openLog opens a single-node Log with id and appends n records.
func openLog(t *testing.T, id string, n int) *replog.Log {
	t.Helper()
	l, err := replog.Open(replog.Options{Dir: t.TempDir(), NodeID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for range n {
		if _, err := l.Append(context.Background(), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestCollectorsShareARegistry: the collectors of several Logs of one
// process register with one registry, told apart by node and by log, and
// each reports its own Log's values; a second collector with the same node
// and log is refused.
func TestCollectorsShareARegistry(t *testing.T) {
	orders, payments, other := openLog(t, "n1", 1), openLog(t, "n1", 2), openLog(t, "n2", 3)
	reg := prometheus.NewPedanticRegistry()
	for _, c := range []struct {
		l   *replog.Log
		log string
	}{{orders, "orders"}, {payments, "payments"}} {
		col, err := NewCollectorWith(c.l, CollectorOptions{Log: c.log})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(col); err != nil {
			t.Fatalf("register the %s collector: %v", c.log, err)
		}
	}
	// Another node ID needs no log name, and mixes with those that have one.
	if err := reg.Register(NewCollector(other)); err != nil {
		t.Fatalf("register n2's collector: %v", err)
	}
	got := gathered(t, reg)
	for key, want := range map[string]float64{
		`replog_appends_total{log="orders",node="n1"}`:   1,
		`replog_appends_total{log="payments",node="n1"}`: 2,
		`replog_appends_total{log="",node="n2"}`:         3,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}

	dup, err := NewCollectorWith(payments, CollectorOptions{Log: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(dup); !errors.As(err, &are) {
		t.Fatalf("a second collector for n1/orders registered: %v, want AlreadyRegisteredError", err)
	}
	if err := reg.Register(NewCollector(other)); !errors.As(err, &are) {
		t.Fatalf("a second collector for n2 registered: %v, want AlreadyRegisteredError", err)
	}
}

func TestCollectorOptionsValidate(t *testing.T) {
	l := openLog(t, "n1", 0)
	if _, err := NewCollectorWith(l, CollectorOptions{Log: "\xff"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Log with invalid UTF-8: %v, want ErrInvalidOptions", err)
	}
}
