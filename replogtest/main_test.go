package replogtest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a
// Cluster's cleanup must stop every node and link.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
