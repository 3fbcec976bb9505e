package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
)

// command is one replogctl subcommand. Each file of commands registers
// its own in an init function (register), so that a new command is a new
// file: online.go has status and tail, logs.go logs, change.go transfer, add-voter,
// remove-voter and delete-before, offline.go (on a stopped node's data
// directory) inspect, verify and dump.
type command struct {
	// Name is what follows replogctl on the command line.
	Name string
	// Summary is one line for the list of commands.
	Summary string
	// Usage is the synopsis of the arguments after the name, e.g.
	// "--addr HOST:PORT [--from N]".
	Usage string
	// Help is printed by --help after the synopsis: what the command does,
	// its output and its exit status (plain text, wrapped by hand).
	Help string
	// Setup declares the command's flags on fs and returns the function
	// that runs the command once they are parsed; args are the arguments
	// left after the flags. The function returns nil for success, an
	// error wrapping errUsage for a bad command line (exit status 2), an
	// *exitError for another status, or any other error (exit status 1).
	// Its output goes to env.stdout, diagnostics to env.stderr.
	Setup func(fs *flag.FlagSet) func(ctx context.Context, env *env, args []string) error
}

// env is what a command runs with.
type env struct {
	stdout, stderr io.Writer
}

// commands are the registered commands, by name.
var commands = map[string]*command{}

// register adds c to the commands; call it from an init function. A
// second command with the same name is a programming error.
func register(c *command) {
	if c.Name == "" || c.Setup == nil {
		panic("replogctl: a command needs a Name and a Setup")
	}
	if _, dup := commands[c.Name]; dup {
		panic("replogctl: command " + c.Name + " registered twice")
	}
	commands[c.Name] = c
}

// errUsage marks a bad command line (exit status 2).
var errUsage = errors.New("usage")

// usageError returns an error wrapping errUsage with the message.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// exitError is an error with an exit status of its own (e.g. verify's
// "the data is damaged").
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string { return e.Err.Error() }
func (e *exitError) Unwrap() error { return e.Err }

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns
// the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				_ = commandHelp(c, stdout)
				return exitOK
			}
			fmt.Fprintf(stderr, "replogctl: no command %q\n", args[1])
			return exitUsage
		}
		usage(stdout)
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "replogctl: no command %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	fs := newFlagSet(c, stderr)
	runFn := c.Setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_ = commandHelp(c, stdout)
			return exitOK
		}
		// The flag package printed the error.
		fmt.Fprintf(stderr, "usage: replogctl %s %s (see replogctl %s --help)\n", c.Name, c.Usage, c.Name)
		return exitUsage
	}
	err := runFn(ctx, &env{stdout: stdout, stderr: stderr}, fs.Args())
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "replogctl %s: %v\n", c.Name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		fmt.Fprintf(stderr, "usage: replogctl %s %s (see replogctl %s --help)\n", c.Name, c.Usage, c.Name)
		return exitUsage
	case errors.As(err, &ee):
		fmt.Fprintf(stderr, "replogctl %s: %v\n", c.Name, ee.Err)
		return ee.Code
	default:
		fmt.Fprintf(stderr, "replogctl %s: %v\n", c.Name, err)
		return exitFailure
	}
}

// newFlagSet returns c's flag set; its errors go to stderr, and run
// prints the usage (to stdout for --help, to stderr after an error).
func newFlagSet(c *command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("replogctl "+c.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// commandHelp prints c's synopsis, help and flags to w.
func commandHelp(c *command, w io.Writer) error {
	fmt.Fprintf(w, "usage: replogctl %s %s\n\n%s\n", c.Name, c.Usage, c.Summary)
	if c.Help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Help))
	}
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	c.Setup(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags (-flag and --flag are the same):\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	return nil
}

// usage lists the commands.
func usage(w io.Writer) {
	fmt.Fprintf(w, "replogctl: inspect and query replog nodes\n\nusage: replogctl COMMAND [flags] [args]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", name, commands[name].Summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nreplogctl COMMAND --help describes a command.\nExit status: 0 success, 1 failure, 2 bad command line (commands may name others).\n")
}
