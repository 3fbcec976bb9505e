package replog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/internal/testwait"
)

// records decodes the JSON lines a slog.JSONHandler wrote.
func records(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func TestSlogLoggerRecords(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true})
	l := SlogLogger(slog.New(h)).Named("replog").With("node", "n1").Named("transport")

	l.Info("connected", "peer", "n2", "attempt", 3)
	l.Trace("dropped: below the handler's level")
	l.Debug("debug")
	l.Warn("warn")
	l.Error("failed", "error", "boom")
	l.Log(hclog.Info, "via Log")

	rs := records(t, buf.Bytes())
	if len(rs) != 5 {
		t.Fatalf("got %d records, want 5 (Trace dropped by a Debug handler):\n%s", len(rs), buf.String())
	}
	first := rs[0]
	if first["level"] != "INFO" || first["msg"] != "connected" || first["logger"] != "replog.transport" ||
		first["node"] != "n1" || first["peer"] != "n2" || first["attempt"] != float64(3) {
		t.Errorf("first record %v", first)
	}
	src, _ := first["source"].(map[string]any)
	if file, _ := src["file"].(string); !strings.HasSuffix(file, "slog_test.go") {
		t.Errorf("source %v: want the caller of Info (slog_test.go)", first["source"])
	}
	for i, want := range []string{"INFO", "DEBUG", "WARN", "ERROR", "INFO"} {
		if rs[i]["level"] != want {
			t.Errorf("record %d level %v, want %s", i, rs[i]["level"], want)
		}
	}
	if !l.IsDebug() || l.IsTrace() || l.GetLevel() != hclog.Debug {
		t.Errorf("IsDebug %v IsTrace %v GetLevel %v; want true, false, debug (the handler's)", l.IsDebug(), l.IsTrace(), l.GetLevel())
	}
	if got := l.ImpliedArgs(); len(got) != 2 || got[0] != "node" || got[1] != "n1" {
		t.Errorf("ImpliedArgs %v", got)
	}
	if l.Name() != "replog.transport" || l.ResetNamed("x").Name() != "x" {
		t.Errorf("names %q, %q", l.Name(), l.ResetNamed("x").Name())
	}
}

func TestSlogLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	root := SlogLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: SlogLevelTrace})))
	child := root.Named("c")
	child.Trace("trace")
	root.SetLevel(hclog.Warn) // reaches the loggers derived from root, as hclog's does
	child.Info("dropped")
	child.Warn("kept")
	root.SetLevel(hclog.Off)
	child.Error("dropped too")
	rs := records(t, buf.Bytes())
	if len(rs) != 2 || rs[0]["level"] != "DEBUG-4" || rs[1]["msg"] != "kept" {
		t.Fatalf("records %v; want the trace record (at DEBUG-4) and the warning", rs)
	}
}

func TestSlogLoggerStandardLogger(t *testing.T) {
	var buf bytes.Buffer
	l := SlogLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, AddSource: true})))
	std := l.Named("memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	std.Printf("[ERR] memberlist: Failed to send: %s", "x")
	std.Print("[DEBUG] memberlist: probing")
	std.Print("no level")
	forced := l.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn})
	_, _ = forced.Write([]byte("[INFO] forced\n"))
	rs := records(t, buf.Bytes())
	want := []struct{ level, msg string }{
		{"ERROR", "memberlist: Failed to send: x"}, {"DEBUG", "memberlist: probing"}, {"INFO", "no level"}, {"WARN", "forced"},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(rs), len(want), buf.String())
	}
	for i, w := range want {
		if rs[i]["level"] != w.level || rs[i]["msg"] != w.msg {
			t.Errorf("record %d: %v %q, want %s %q", i, rs[i]["level"], rs[i]["msg"], w.level, w.msg)
		}
	}
	src, _ := rs[0]["source"].(map[string]any)
	if file, _ := src["file"].(string); !strings.HasSuffix(file, "slog_test.go") {
		t.Errorf("source %v: want the caller of Printf", rs[0]["source"])
	}
}

// TestSlogLoggerCarriesANodesLogs: a node opened with SlogLogger logs
// through the slog handler, with the component's name.
func TestSlogLoggerCarriesANodesLogs(t *testing.T) {
	var buf testwait.Buffer
	l, err := Open(Options{Dir: t.TempDir(), Logger: SlogLogger(slog.New(slog.NewJSONHandler(&buf, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range records(t, []byte(buf.String())) {
		if r["logger"] == "storage" && r["node"] == DefaultNodeID && r["level"] == "INFO" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no Info record of the storage component (node %s) in:\n%s", DefaultNodeID, buf.String())
	}
}

// count returns how often key appears as a JSON key in line.
func count(line, key string) int { return strings.Count(line, `"`+key+`":`) }

// TestSlogLoggerOmitsAndRenamesCarriedAttributes: with SlogOptions, the
// attributes a logger carries (With's, the name) are left out or renamed,
// so a handler that already carries the node ID writes it once; a call's
// own attributes are written as given.
func TestSlogLoggerOmitsAndRenamesCarriedAttributes(t *testing.T) {
	var plain, opted bytes.Buffer
	service := func(b *bytes.Buffer) *slog.Logger {
		return slog.New(slog.NewJSONHandler(b, nil)).With(SlogAttrNode, "svc-1")
	}
	use := func(l hclog.Logger) {
		l.Named("transport").With(SlogAttrNode, "n1", slog.String("lane", "fetch"), "peer", "n2").Info("connected", "attempt", 1)
		l.With("peer", "n3").Info("call", SlogAttrNode, "n4")
	}
	// Control: without options the node ID comes twice, the service's and
	// replog's.
	use(SlogLogger(service(&plain)))
	if line := strings.Split(plain.String(), "\n")[0]; count(line, "node") != 2 || count(line, "logger") != 1 {
		t.Fatalf("without options: %s; want node twice and logger once", line)
	}

	l, err := SlogLoggerWith(service(&opted), SlogOptions{
		Omit:   []string{SlogAttrNode},
		Rename: map[string]string{SlogAttrLogger: "component", "lane": "replog_lane"},
	})
	if err != nil {
		t.Fatal(err)
	}
	use(l)
	lines := strings.Split(strings.TrimSpace(opted.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), opted.String())
	}
	first := lines[0]
	if count(first, "node") != 1 || !strings.Contains(first, `"node":"svc-1"`) || count(first, "logger") != 0 ||
		!strings.Contains(first, `"component":"transport"`) || !strings.Contains(first, `"replog_lane":"fetch"`) ||
		count(first, "lane") != 0 || !strings.Contains(first, `"peer":"n2"`) || !strings.Contains(first, `"attempt":1`) {
		t.Errorf("first record %s; want the service's node only, component for logger, replog_lane for lane, peer and attempt as given", first)
	}
	// A call's own attributes are not the logger's: its node (here another
	// node, as gossip's records name members) stays.
	if second := lines[1]; !strings.Contains(second, `"node":"n4"`) || count(second, "component") != 0 || !strings.Contains(second, `"peer":"n3"`) {
		t.Errorf("second record %s; want the call's node n4, peer n3 and no component (the logger has no name)", second)
	}
	if got := l.With(SlogAttrNode, "n1").ImpliedArgs(); len(got) != 2 || got[0] != SlogAttrNode {
		t.Errorf("ImpliedArgs %v: want what With was given", got)
	}
}

// TestSlogLoggerOmitsTheNodeOfAnOpenedLog: a node opened with a logger
// that omits SlogAttrNode writes only the service's node attribute.
func TestSlogLoggerOmitsTheNodeOfAnOpenedLog(t *testing.T) {
	var buf testwait.Buffer
	logger, err := SlogLoggerWith(slog.New(slog.NewJSONHandler(&buf, nil)).With(SlogAttrNode, "svc-1"), SlogOptions{Omit: []string{SlogAttrNode}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(Options{Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("the node logged nothing")
	}
	for _, line := range lines {
		if count(line, "node") != 1 || !strings.Contains(line, `"node":"svc-1"`) {
			t.Errorf("record %s: want the service's node attribute once", line)
		}
	}
}

func TestSlogOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		o     SlogOptions
	}{
		{"Omit", SlogOptions{Omit: []string{""}}},
		{"Rename", SlogOptions{Rename: map[string]string{"logger": ""}}},
		{"Rename", SlogOptions{Rename: map[string]string{"": "x"}}},
		{"Rename", SlogOptions{Omit: []string{"node"}, Rename: map[string]string{"node": "n"}}},
		{"Rename", SlogOptions{Rename: map[string]string{"node": "x", "logger": "x"}}},
	} {
		err := tc.o.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "SlogOptions."+tc.field) {
			t.Errorf("%+v: %v, want ErrInvalidOptions naming %s", tc.o, err, tc.field)
		}
		if _, err := SlogLoggerWith(slog.Default(), tc.o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("SlogLoggerWith(%+v) = %v, want ErrInvalidOptions", tc.o, err)
		}
	}
	if err := (SlogOptions{Omit: []string{"node"}, Rename: map[string]string{"logger": "component"}}).Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
