package replog_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The layering of the module (docs/architecture.md section 5), as a test: the import
// graph of the module's packages, read with go list (non-test imports
// only: tests may import anything), must keep every rule of layerRules,
// and the deterministic packages must start no goroutine and read no
// wall clock (TestLayeringDeterministicCode).

const modulePath = "github.com/replog-io/replog"

// Patterns name packages: "." is the root package, "./x" the module's
// package x, "./x/..." x and every package below it, a pattern ending in
// "*" every path it is a prefix of ("./replog*"); "net/..." and the like
// are import paths, with the same "/..." form; "std" is any standard
// library package, "main" any program (package main).

// The I/O and concurrency of the standard library that deterministic code
// does not import: files and processes, the network, locks and atomics
// (a single-threaded core needs none), real randomness, the runtime.
var noIOImports = []string{
	"os", "os/...", "syscall", "io/fs", "path/filepath", "net", "net/...",
	"sync", "sync/...", "crypto/rand", "runtime", "unsafe", "log", "log/...",
}

// What deterministic code does not link, even through a dependency: the
// network, TLS, processes, the stores, gossip, metrics, and the module's
// I/O packages and shell.
var noIOLinks = []string{
	"net", "net/...", "crypto/tls", "os/exec",
	"go.etcd.io/bbolt/...", "github.com/hashicorp/memberlist/...", "github.com/prometheus/...",
	"./storage/...", "./transport/...", "./membership/...", ".", "./internal/shell/...",
}

// The test harnesses: imported by tests and by each other only.
var harnesses = []string{
	"./internal/simulation/...", "./internal/faults/...", "./internal/hostile/...",
	"./internal/protocoltest/...", "./internal/storagetest/...",
	"./internal/testwait/...", "./internal/testpki/...",
}

// The core: the protocol's vocabulary, the follower side and the replica.
var core = []string{"./protocol/...", "./fetcher/...", "./replica/..."}

type ruleKind int

const (
	// noImport: no package of from imports (directly) one of deny.
	noImport ruleKind = iota
	// noLink: no package of from links (imports, directly or not) one of
	// deny.
	noLink
	// importOnly: every direct import of a package of from is one of
	// allow.
	importOnly
	// importedOnlyBy: a package of the module that imports one of from
	// (and is not one of from) is one of allow.
	importedOnlyBy
)

// layerRule is one rule of the layering. The docs state each rule's
// text.
type layerRule struct {
	rule   string
	kind   ruleKind
	from   []string
	except []string // packages of from the rule exempts
	deny   []string // noImport, noLink
	allow  []string // importOnly, importedOnlyBy
}

var layerRules = []layerRule{
	{rule: "the core (protocol, fetcher, replica) links no I/O: no network, TLS, process, store, gossip or metrics package, and none of the module's I/O packages or shell",
		kind: noLink, from: core, deny: noIOLinks},
	{rule: "the core imports no file, network, concurrency or real-randomness package of the standard library (time only for its types: it takes the time as an argument)",
		kind: noImport, from: core, deny: noIOImports},
	{rule: "the core imports, of the module, only the core; of the rest, the standard library and hclog",
		kind: importOnly, from: core, allow: append([]string{"std", "github.com/hashicorp/go-hclog"}, core...)},
	{rule: "protocol is a leaf: it imports the standard library only",
		kind: importOnly, from: []string{"./protocol/..."}, allow: []string{"std"}},
	{rule: "storage imports, of the module, only protocol; of the rest, the standard library, bbolt and hclog",
		kind: importOnly, from: []string{"./storage/..."}, allow: []string{"std", "./protocol", "go.etcd.io/bbolt/...", "github.com/hashicorp/go-hclog"}},
	{rule: "storage links no network or TLS",
		kind: noLink, from: []string{"./storage/..."}, deny: []string{"net", "net/...", "crypto/tls"}},
	{rule: "transport and membership link neither the core nor storage nor the shell nor the root, and no bbolt",
		kind: noLink, from: []string{"./transport/...", "./membership/..."},
		deny: []string{"./replica/...", "./fetcher/...", "./storage/...", "./internal/shell/...", ".", "go.etcd.io/bbolt/..."}},
	{rule: "only the root wires the parts together: transport and membership are imported by the root alone",
		kind: importedOnlyBy, from: []string{"./transport/...", "./membership/..."}, allow: []string{"."}},
	{rule: "only programs, the adapters over the public API (top-level replog* packages: replogprom, replogadmin, replogtest) and the views built on it (kv) import the root package",
		kind: importedOnlyBy, from: []string{"."}, allow: []string{"main", "./replog*", "./kv"}},
	{rule: "the adapters over the public API (replogprom, replogadmin) import no package of the module but the root",
		kind: noImport, from: []string{"./replogprom/...", "./replogadmin/..."}, deny: []string{"./*"}},
	{rule: "kv imports, of the module, only the root and its state machine (internal/kvstate)",
		kind: importOnly, from: []string{"./kv/..."}, allow: []string{"std", ".", "./internal/kvstate"}},
	{rule: "internal/kvstate, the KV's state machine, imports, of the module, only protocol",
		kind: importOnly, from: []string{"./internal/kvstate/..."}, allow: []string{"std", "./protocol"}},
	{rule: "internal/kvstate imports no file, network, concurrency or real-randomness package",
		kind: noImport, from: []string{"./internal/kvstate/..."}, deny: noIOImports},
	{rule: "no library package links Prometheus but replogprom (programs may)",
		kind: noLink, from: []string{"./..."}, except: []string{"main", "./replogprom/..."}, deny: []string{"github.com/prometheus/..."}},
	{rule: "the test harnesses (simulation, faults, hostile, protocoltest, storagetest, testwait, testpki) are imported only by tests and by each other",
		kind: importedOnlyBy, from: harnesses, allow: harnesses},
	{rule: "internal/shell imports no file, network, concurrency or real-randomness package",
		kind: noImport, from: []string{"./internal/shell/..."}, deny: noIOImports},
	{rule: "internal/shell imports, of the module, only protocol, replica and storage (for the read path's errors and log view)",
		kind: importOnly, from: []string{"./internal/shell/..."}, allow: []string{"std", "./protocol", "./replica", "./storage"}},
	{rule: "internal/shell links no network, TLS, process, gossip or metrics package, and neither transport, membership nor the root",
		kind: noLink, from: []string{"./internal/shell/..."},
		deny: []string{"net", "net/...", "crypto/tls", "os/exec", "github.com/hashicorp/memberlist/...", "github.com/prometheus/...", "./transport/...", "./membership/...", "."}},
	{rule: "the simulation imports no file, network, concurrency or real-randomness package",
		kind: noImport, from: []string{"./internal/simulation"}, deny: noIOImports},
	{rule: "the simulation links no network, TLS, process or gossip package",
		kind: noLink, from: []string{"./internal/simulation"}, deny: []string{"net", "net/...", "crypto/tls", "os/exec", "github.com/hashicorp/memberlist/...", "./transport/...", "./membership/..."}},
}

// deterministic are the packages whose code must start no goroutine and
// read no wall clock: the core, the shell's round, the simulation and the
// KV's state machine.
var deterministic = append(slices.Clone(core), "./internal/shell/...", "./internal/simulation", "./internal/kvstate/...")

// pkg is one package of the module, as go list reports it.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// graph maps import paths of the module's packages to them.
type graph map[string]*pkg

var (
	graphOnce   sync.Once
	loadedGraph graph
	graphErr    error
)

// loadGraph returns the module's import graph (read once per test binary;
// each caller gets its own copy).
func loadGraph(t *testing.T) graph {
	t.Helper()
	graphOnce.Do(func() { loadedGraph, graphErr = readGraph() })
	if graphErr != nil {
		t.Fatal(graphErr)
	}
	return loadedGraph.clone()
}

func readGraph() (graph, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the layering test reads the import graph with the go command: %w", err)
	}
	cmd := exec.Command(goTool, "list", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -json ./...: %w\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		g[p.ImportPath] = &p
	}
	for _, want := range []string{modulePath, modulePath + "/replica", modulePath + "/protocol", modulePath + "/internal/shell"} {
		if g[want] == nil {
			return nil, fmt.Errorf("go list lists no package %s: the graph is not the module's", want)
		}
	}
	return g, nil
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// matches reports whether import path path (of package p, nil if it is no
// package of the module) matches pattern.
func matches(pattern, path string, p *pkg) bool {
	switch pattern {
	case "std":
		return isStd(path)
	case "main":
		return p != nil && p.Name == "main"
	}
	if pattern == "." {
		pattern = modulePath
	} else if rest, ok := strings.CutPrefix(pattern, "./"); ok {
		pattern = modulePath + "/" + rest
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchesAny(patterns []string, path string, p *pkg) bool {
	for _, pat := range patterns {
		if matches(pat, path, p) {
			return true
		}
	}
	return false
}

// applies reports whether r constrains package p.
func (r layerRule) applies(p *pkg) bool {
	return matchesAny(r.from, p.ImportPath, p) && !matchesAny(r.except, p.ImportPath, p)
}

// check returns r's violations in g, and how many packages r applies to.
func (r layerRule) check(g graph) (violations []string, applied int) {
	for _, path := range slices.Sorted(maps.Keys(g)) {
		p := g[path]
		switch r.kind {
		case noImport, noLink, importOnly:
			if !r.applies(p) {
				continue
			}
			applied++
			list, verb := p.Imports, "imports"
			if r.kind == noLink {
				list, verb = p.Deps, "links"
			}
			for _, dep := range list {
				bad := matchesAny(r.deny, dep, g[dep])
				if r.kind == importOnly {
					bad = !matchesAny(r.allow, dep, g[dep])
				}
				if bad {
					violations = append(violations, fmt.Sprintf("%s %s %s", short(path), verb, short(dep)))
				}
			}
		case importedOnlyBy:
			if r.applies(p) {
				applied++
				continue
			}
			if matchesAny(r.allow, path, p) {
				continue
			}
			for _, dep := range p.Imports {
				if d := g[dep]; d != nil && r.applies(d) {
					violations = append(violations, fmt.Sprintf("%s imports %s", short(path), short(dep)))
				}
			}
		}
	}
	return violations, applied
}

func short(path string) string {
	if path == modulePath {
		return "replog (root)"
	}
	if rest, ok := strings.CutPrefix(path, modulePath+"/"); ok {
		return rest
	}
	return path
}

// TestLayering: the module's import graph keeps every rule of layerRules,
// and every rule constrains some package (a rule whose packages were
// renamed away would pass for ever).
func TestLayering(t *testing.T) {
	g := loadGraph(t)
	for _, r := range layerRules {
		violations, applied := r.check(g)
		if applied == 0 {
			t.Errorf("rule %q applies to no package of the module", r.rule)
		}
		for _, v := range violations {
			t.Errorf("layering: %s, but %s", v, r.rule)
		}
	}
}

// example returns an import path that pattern matches (for the positive
// controls).
func example(pattern string) string {
	switch pattern {
	case "std":
		return "strings"
	case ".":
		return modulePath
	}
	if rest, ok := strings.CutPrefix(pattern, "./"); ok {
		pattern = modulePath + "/" + rest
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return prefix + "planted"
	}
	return strings.TrimSuffix(pattern, "/...")
}

// clone copies g deeply enough to add imports to it.
func (g graph) clone() graph {
	c := graph{}
	for path, p := range g {
		q := *p
		q.Imports, q.Deps = slices.Clone(p.Imports), slices.Clone(p.Deps)
		c[path] = &q
	}
	return c
}

// TestLayeringRulesHaveTeeth: each rule reports a violation planted in the
// real graph, and only where it was planted: a package it constrains
// importing what it denies (or what it does not allow), or a package
// outside its allowed importers importing a package it guards.
func TestLayeringRulesHaveTeeth(t *testing.T) {
	real := loadGraph(t)
	for _, r := range layerRules {
		if v, _ := r.check(real); len(v) > 0 {
			t.Errorf("rule %q fails on the real graph (TestLayering says how); its control proves nothing", r.rule)
			continue
		}
		g := real.clone()
		var victim *pkg
		for _, path := range slices.Sorted(maps.Keys(g)) {
			if r.applies(g[path]) {
				victim = g[path]
				break
			}
		}
		if victim == nil {
			t.Errorf("rule %q applies to no package", r.rule)
			continue
		}
		var planted string
		switch r.kind {
		case noImport:
			planted = example(r.deny[0])
			victim.Imports = append(victim.Imports, planted)
		case noLink:
			planted = example(r.deny[len(r.deny)-1])
			victim.Deps = append(victim.Deps, planted)
		case importOnly:
			planted = modulePath + "/transport" // allowed by no importOnly rule
			victim.Imports = append(victim.Imports, planted)
		case importedOnlyBy:
			planted = modulePath + "/internal/planted"
			g[planted] = &pkg{ImportPath: planted, Name: "planted", Imports: []string{victim.ImportPath}}
		}
		v, _ := r.check(g)
		if len(v) != 1 || !strings.Contains(v[0], short(planted)) && !strings.Contains(v[0], short(victim.ImportPath)) {
			t.Errorf("rule %q with %s planted at %s reports %q, want one violation naming it", r.rule, short(planted), short(victim.ImportPath), v)
			continue
		}
		t.Logf("planted: %s", v[0])
	}
}

// TestLayeringPatterns: the pattern forms the rules use match what they
// say.
func TestLayeringPatterns(t *testing.T) {
	mainPkg := &pkg{Name: "main"}
	for _, tc := range []struct {
		pattern, path string
		p             *pkg
		want          bool
	}{
		{".", modulePath, nil, true},
		{".", modulePath + "/replica", nil, false},
		{"./replica/...", modulePath + "/replica", nil, true},
		{"./replica/...", modulePath + "/replica/internal/bugs", nil, true},
		{"./replica/...", modulePath + "/replicas", nil, false},
		{"./replica", modulePath + "/replica/internal/bugs", nil, false},
		{"./replog*", modulePath + "/replogprom", nil, true},
		{"./replog*", modulePath + "/replica", nil, false},
		{"net/...", "net/http", nil, true},
		{"net/...", "net", nil, true},
		{"net/...", "netip", nil, false},
		{"std", "encoding/binary", nil, true},
		{"std", "go.etcd.io/bbolt", nil, false},
		{"std", modulePath + "/protocol", nil, false},
		{"main", modulePath + "/example", mainPkg, true},
		{"main", modulePath + "/replica", &pkg{Name: "replica"}, false},
		{"github.com/prometheus/...", "github.com/prometheus/client_golang/prometheus", nil, true},
	} {
		if got := matches(tc.pattern, tc.path, tc.p); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

// wallClock are the functions of package time that read the real clock or
// wait on it.
var wallClock = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// nondeterminism returns the go statements and wall-clock calls of one
// file's source.
func nondeterminism(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	timeName := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			found = append(found, fmt.Sprintf("%s: starts a goroutine", fset.Position(n.Pos())))
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && slices.Contains(wallClock, n.Sel.Name) {
				found = append(found, fmt.Sprintf("%s: reads the wall clock (time.%s)", fset.Position(n.Pos()), n.Sel.Name))
			}
		}
		return true
	})
	return found, nil
}

// TestLayeringDeterministicCode: the core, the shell's round and the
// simulation start no goroutine and read no wall clock outside their
// tests: they take the time as an argument, and the simulation's runs are
// single-threaded in simulated time.
func TestLayeringDeterministicCode(t *testing.T) {
	g := loadGraph(t)
	fset := token.NewFileSet()
	files := 0
	for _, path := range slices.Sorted(maps.Keys(g)) {
		p := g[path]
		if !matchesAny(deterministic, path, p) {
			continue
		}
		for _, f := range p.GoFiles {
			found, err := nondeterminism(fset, filepath.Join(p.Dir, f), nil)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, s := range found {
				t.Errorf("%s: deterministic code may not", s)
			}
		}
	}
	if files == 0 {
		t.Fatal("no file of the deterministic packages was read")
	}
}

// TestLayeringDeterministicCodeHasTeeth: the scan finds a goroutine and
// wall-clock reads, the time package renamed too, and nothing in code
// that only uses time's types.
func TestLayeringDeterministicCodeHasTeeth(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"package p\nimport \"time\"\nfunc f(now time.Time) time.Duration { return time.Duration(now.Unix()) * time.Millisecond }\n", 0},
		{"package p\nfunc f() { go f() }\n", 1},
		{"package p\nimport \"time\"\nfunc f() time.Time { time.Sleep(1); return time.Now() }\n", 2},
		{"package p\nimport clock \"time\"\nfunc f() { _ = clock.Since(clock.Time{}) }\n", 1},
		{"package p\ntype x struct{}\nfunc (x) Now() {}\nfunc f() { var time x; time.Now() }\n", 0},
	} {
		found, err := nondeterminism(token.NewFileSet(), "p.go", tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != tc.want {
			t.Errorf("%q: found %q, want %d", tc.src, found, tc.want)
		}
	}
}
