package replogprom

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRootDoesNotLinkPrometheus: a program that imports replog but not
// this package links no Prometheus code (the reason this package exists).
func TestRootDoesNotLinkPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/replog-io/replog").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/hashicorp/memberlist") {
		t.Fatalf("go list -deps of the root lists no memberlist: the check reads the wrong output:\n%s", out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "prometheus") {
			t.Errorf("the root package links %s", p)
		}
	}
	// Positive control: this package does.
	out, err = exec.Command("go", "list", "-deps", "github.com/replog-io/replog/replogprom").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "github.com/prometheus/client_golang/prometheus") {
		t.Fatalf("go list -deps of replogprom: %v, no client_golang in:\n%s", err, out)
	}
}
