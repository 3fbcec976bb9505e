package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog"
)

// scrape GETs base/metrics and returns each sample, keyed as the text
// format prints it: `name{label="v",...}` (labels in Prometheus' order).
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s/metrics: %d %s", base, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// series is the key scrape gives a series of the example's collector on
// node: name with its labels (pairs of name and value) and replogprom's
// node and log labels, in the text format's order (sorted by name). The
// example leaves the log label empty: the text format prints it as
// log="" (Prometheus stores it as no label).
func series(name, node string, labels ...string) string {
	pairs := [][2]string{{"log", ""}, {"node", node}}
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, [2]string{labels[i], labels[i+1]})
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	b.WriteString(name + "{")
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", p[0], p[1])
	}
	b.WriteByte('}')
	return b.String()
}

// TestMetricsMoveWithTheLog: /metrics of a node on a real Log shows its
// appends, offsets and disk commits move as it works.
func TestMetricsMoveWithTheLog(t *testing.T) {
	n, err := replog.OpenNode(replog.Options{Dir: t.TempDir(), NodeID: "n1", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s := &server{node: n.Default(), self: "n1", appendTimeout: 10 * time.Second, maxRecord: maxRecordSize,
		metrics: metricsHandler(n, hclog.NewNullLogger()), logger: hclog.NewNullLogger()}
	srv := httptest.NewServer(s.handler())
	defer srv.Close()

	before := scrape(t, srv.URL)
	for _, name := range []string{
		series("replog_appends_total", "n1"), series("replog_high_watermark", "n1"), series("replog_role", "n1", "role", "leader"),
		series("replog_storage_commit_duration_seconds_count", "n1"), series("replog_errors_total", "n1", "kind", "transport_send"),
		`go_goroutines`, `process_open_fds`,
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("no %s in /metrics", name)
		}
	}
	for _, rec := range []string{"hello", "world!"} {
		resp, err := http.Post(srv.URL+"/append", "text/plain", strings.NewReader(rec))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("append: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	after := scrape(t, srv.URL)
	moved := func(name string, by float64) {
		t.Helper()
		if got := after[name] - before[name]; by > 0 && got != by || by == 0 && got <= 0 {
			t.Errorf("%s moved by %v (%v -> %v), want %v", name, got, before[name], after[name], map[bool]any{true: by, false: "> 0"}[by > 0])
		}
	}
	moved(series("replog_appends_total", "n1"), 2)
	moved(series("replog_append_bytes_total", "n1"), 11)
	moved(series("replog_commit_duration_seconds_count", "n1"), 2)
	moved(series("replog_high_watermark", "n1"), 0)
	moved(series("replog_storage_commit_duration_seconds_count", "n1"), 0)
	if after[series("replog_role", "n1", "role", "leader")] != 1 || after[series("replog_has_leader", "n1")] != 1 {
		t.Errorf("a single node is not shown as its own leader: role %v, has_leader %v",
			after[series("replog_role", "n1", "role", "leader")], after[series("replog_has_leader", "n1")])
	}
}
