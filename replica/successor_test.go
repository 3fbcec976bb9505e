package replica

import (
	"fmt"
	"testing"
)

// TestSuccessor checks R106's choice of the voter that stands first: the
// same on every node whatever order its voter set lists, never the old
// leader, "" with no other voter, and spread over the others by log name.
func TestSuccessor(t *testing.T) {
	if got := Successor("x", []string{"n1"}, "n1"); got != "" {
		t.Fatalf("successor of the only voter = %q, want none", got)
	}
	if got := Successor("x", []string{"n1", "n2"}, "n1"); got != "n2" {
		t.Fatalf("successor among one other voter = %q, want n2", got)
	}
	counts := map[string]int{}
	for i := range 300 {
		name := fmt.Sprintf("log-%d", i)
		s := Successor(name, []string{"n1", "n2", "n3"}, "n1")
		for _, order := range [][]string{{"n3", "n2", "n1"}, {"n2", "n1", "n3"}} {
			if o := Successor(name, order, "n1"); o != s {
				t.Fatalf("%s: successor %q with voters %v, %q with n1,n2,n3: not the same function on every node", name, o, order, s)
			}
		}
		if s == "n1" || s == "" {
			t.Fatalf("%s: successor %q, want n2 or n3", name, s)
		}
		counts[s]++
	}
	// FNV-1a spreads 300 names about evenly: each survivor stands first
	// for its share of the dead node's logs, not one for all.
	if counts["n2"] < 100 || counts["n3"] < 100 {
		t.Fatalf("successors of 300 logs: %v, want each of n2 and n3 at least 100", counts)
	}
}
