package replogprom_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogprom"
)

// Register a node's collector and serve /metrics; the values are read
// from the node at each scrape.
func ExampleNewCollector() {
	dir, err := os.MkdirTemp("", "replogprom-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{Dir: dir, NodeID: "n1"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(replogprom.NewCollector(l))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for _, r := range []string{"a", "bc"} {
		if _, err := l.Append(context.Background(), []byte(r)); err != nil {
			log.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "replog_appends_total", "replog_append_bytes_total", "replog_has_leader":
			m := mf.GetMetric()[0]
			fmt.Println(mf.GetName(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		case "replog_commit_duration_seconds":
			fmt.Println(mf.GetName(), "count", mf.GetMetric()[0].GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// replog_append_bytes_total 3
	// replog_appends_total 2
	// replog_commit_duration_seconds count 2
	// replog_has_leader 1
}
