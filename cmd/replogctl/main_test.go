package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// runCmd runs replogctl with args and returns its exit status and output.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestEveryCommandHasHelp(t *testing.T) {
	if len(commands) < 2 {
		t.Fatalf("only %d commands registered", len(commands))
	}
	for name, c := range commands {
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runCmd(t, name, h)
			if code != exitOK || errOut != "" {
				t.Errorf("%s %s: exit %d, stderr %q", name, h, code, errOut)
			}
			if !strings.HasPrefix(out, "usage: replogctl "+name+" ") || !strings.Contains(out, c.Summary) {
				t.Errorf("%s %s printed:\n%s", name, h, out)
			}
			// Every flag is described.
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			c.Setup(fs)
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(out, "-"+f.Name) {
					t.Errorf("%s --help does not describe -%s", name, f.Name)
				}
			})
		}
		if code, out, _ := runCmd(t, "help", name); code != exitOK || !strings.HasPrefix(out, "usage: replogctl "+name) {
			t.Errorf("help %s: exit %d:\n%s", name, code, out)
		}
	}
}

func TestCommandList(t *testing.T) {
	code, out, _ := runCmd(t, "help")
	if code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	for name, c := range commands {
		if !strings.Contains(out, name) || !strings.Contains(out, c.Summary) {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
	}
	if code, _, errOut := runCmd(t); code != exitUsage || !strings.Contains(errOut, "Commands:") {
		t.Errorf("no command: exit %d, stderr %q; want 2 and the list", code, errOut)
	}
	if code, _, errOut := runCmd(t, "frobnicate"); code != exitUsage || !strings.Contains(errOut, `no command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "status", "--no-such-flag"); code != exitUsage || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("bad flag: exit %d, stderr %q", code, errOut)
	}
}

func TestRegisterAndExitStatuses(t *testing.T) {
	defer delete(commands, "test-exit")
	register(&command{Name: "test-exit", Summary: "exits as told", Usage: "CODE",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			return func(_ context.Context, e *env, args []string) error {
				switch strings.Join(args, " ") {
				case "ok":
					return nil
				case "usage":
					return usageError("bad")
				case "three":
					return &exitError{Code: 3, Err: errors.New("damaged")}
				}
				return errors.New("failed")
			}
		}})
	for arg, want := range map[string]int{"ok": 0, "usage": 2, "three": 3, "other": 1} {
		if code, _, _ := runCmd(t, "test-exit", arg); code != want {
			t.Errorf("test-exit %s: exit %d, want %d", arg, code, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	register(&command{Name: "test-exit", Setup: commands["test-exit"].Setup})
}
