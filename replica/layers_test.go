package replica

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// packageFuncs parses the package's non-test files and returns, for each
// function or method name, the files declaring it and the names it calls
// (by name: a method of another type with the same name counts too, which
// only makes the checks below stricter).
func packageFuncs(t *testing.T) (files []*ast.File, names []string, declaredIn map[string][]string, calls map[string]map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	declaredIn, calls = map[string][]string{}, map[string]map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files, names = append(files, f), append(names, n)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			declaredIn[name] = append(declaredIn[name], n)
			if calls[name] == nil {
				calls[name] = map[string]bool{}
			}
			ast.Inspect(fd.Body, func(x ast.Node) bool {
				if c, ok := x.(*ast.CallExpr); ok {
					switch fn := c.Fun.(type) {
					case *ast.Ident:
						calls[name][fn.Name] = true
					case *ast.SelectorExpr:
						calls[name][fn.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	return files, names, declaredIn, calls
}

// TestRolesMoveOnlyInTransitions checks the layering doc.go states:
// transitions.go is the one file that assigns a replica's role.
func TestRolesMoveOnlyInTransitions(t *testing.T) {
	files, names, _, _ := packageFuncs(t)
	assigned := false
	for i, f := range files {
		ast.Inspect(f, func(x ast.Node) bool {
			as, ok := x.(*ast.AssignStmt)
			if !ok {
				return true
			}
			for _, lhs := range as.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "role" {
					if names[i] != "transitions.go" {
						t.Errorf("%s assigns the role: only transitions.go may", names[i])
					}
					assigned = true
				}
			}
			return true
		})
	}
	if !assigned {
		t.Fatal("no assignment of the role found at all: the check is looking at the wrong field")
	}
}

// TestWritesNeverMoveTheRole checks that nothing writes.go declares, nor
// the other writes (a reset, a prefix deletion), nor the recording of the
// voter set in force (refreshVoters) or of a new HW, nor anything they
// call, reaches transitions.go: they record log, voter-set and HW state,
// and the handler that called them settles the role.
func TestWritesNeverMoveTheRole(t *testing.T) {
	_, _, declaredIn, calls := packageFuncs(t)
	var start []string
	for name, in := range declaredIn {
		if slices.Contains(in, "writes.go") {
			start = append(start, name)
		}
	}
	if !slices.Contains(start, "appendEntries") || !slices.Contains(start, "truncate") {
		t.Fatalf("writes.go declares %v: appendEntries and truncate expected", start)
	}
	start = append(start, "refreshVoters", "resetLog", "deletePrefix",
		"updateLeaderHW", "updateFollowerHW", "resetPersisted", "ackUpTo", "leaderPropose")
	via := map[string]string{}
	queue := slices.Clone(start)
	for _, s := range start {
		via[s] = ""
	}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if slices.Contains(declaredIn[f], "transitions.go") {
			path := f
			for p := via[f]; p != ""; p = via[p] {
				path = p + " → " + path
			}
			t.Errorf("a write reaches a role transition: %s", path)
			continue
		}
		for c := range calls[f] {
			if _, seen := via[c]; !seen && declaredIn[c] != nil {
				via[c] = f
				queue = append(queue, c)
			}
		}
	}
	if _, ok := via["refreshVoters"]; !ok || declaredIn["settleRole"] == nil {
		t.Fatal("refreshVoters or settleRole not found: the check is looking at the wrong names")
	}
}
