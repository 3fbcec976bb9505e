package hostile

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// A child process started by the damaged-file tests opens one data
	// directory and reports; it runs no tests (see files_test.go).
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(childOpen(dir))
	}
	goleak.VerifyTestMain(m)
}
