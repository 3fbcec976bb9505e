package replogadmin

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Log a test opens is closed, and a request that waits for entries
// leaves no reader behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
