package replogadmin

import (
	"os/exec"
	"strings"
	"testing"
)

// The handler is built on the public replog API alone: among the module's
// packages it imports only the root (no core, store or internal package
// whose use would bypass the Log's rules), and it links no Prometheus
// client (metrics are replogprom's).
func TestImportsOnlyThePublicAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/replog-io/replog/replogadmin").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := strings.Fields(string(out))
	root := false
	for _, p := range imports {
		switch {
		case p == "github.com/replog-io/replog":
			root = true
		case strings.HasPrefix(p, "github.com/replog-io/replog/"), strings.Contains(p, "prometheus"):
			t.Errorf("replogadmin imports %s", p)
		}
	}
	if !root { // positive control: the list is the package's imports
		t.Fatalf("replogadmin's imports lack the root package: %q", imports)
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/replog-io/replog/replogadmin").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "prometheus") {
			t.Errorf("replogadmin links %s", p)
		}
	}
}
