package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.dir != "" {
		os.RemoveAll(buildOnce.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// buildOnce builds the example binary once per test run (TestMain removes it).
var buildOnce struct {
	sync.Once
	dir, bin string
	err      error
	out      []byte
}

// exampleBinary returns the path of the example built from this package.
func exampleBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildOnce.dir, buildOnce.err = os.MkdirTemp("", "replog-example-bin-")
		if buildOnce.err != nil {
			return
		}
		buildOnce.bin = filepath.Join(buildOnce.dir, "example")
		cmd := exec.Command("go", "build", "-o", buildOnce.bin, ".")
		buildOnce.out, buildOnce.err = cmd.CombinedOutput()
	})
	if buildOnce.err != nil {
		t.Fatalf("go build: %v\n%s", buildOnce.err, buildOnce.out)
	}
	return buildOnce.bin
}
