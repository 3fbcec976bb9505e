package nodeproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the child: with NODEPROC_TEST_HELPER set it
// runs helperMain instead of the tests.
const helperEnv = "NODEPROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helperMain(mode)
		return
	}
	goleak.VerifyTestMain(m)
}

// helperMain is a child's behaviour:
//
//	exit    print a line on each stream and exit with NODEPROC_TEST_CODE
//	sleep   print "ready", then sleep until killed
//	term    print "ready", exit 0 on SIGTERM
//	user1   print "ready", then "user1" on each SIGUSR1
//	group   start a "sleep" child in its own process group (plain
//	        exec), print "child PID", then sleep until killed
//	parent  start a "sleep" child through a Supervisor, print
//	        "child PID", then sleep until killed
func helperMain(mode string) {
	switch mode {
	case "exit":
		fmt.Println("out: " + os.Getenv("NODEPROC_TEST_WORD"))
		fmt.Fprintln(os.Stderr, "err: "+os.Getenv("NODEPROC_TEST_WORD"))
		code, _ := strconv.Atoi(os.Getenv("NODEPROC_TEST_CODE"))
		os.Exit(code)
	case "sleep":
		fmt.Println("ready")
		sleepForever()
	case "term":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("ready")
		<-ch
		fmt.Println("terminating")
		os.Exit(0)
	case "user1":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGUSR1)
		fmt.Println("ready")
		for range ch {
			fmt.Println("user1")
		}
	case "group":
		// A child in this process's group, started without nodeproc.
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=sleep")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("child %d\n", cmd.Process.Pid)
		sleepForever()
	case "parent":
		s := NewSupervisor()
		lines := make(chan string, 16)
		p := s.Process(helperSpec("sleep", func(l string) { lines <- l }))
		if err := p.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		<-lines
		fmt.Printf("child %d\n", p.PID())
		sleepForever()
	}
	os.Exit(3)
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// helperSpec runs this test binary as a child in the given mode.
func helperSpec(mode string, stdout func(string), env ...string) Spec {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return Spec{Path: exe, Args: []string{"-test.run=^$"}, Env: append([]string{helperEnv + "=" + mode}, env...), StdoutLine: stdout}
}

// FreeAddrs gives distinct loopback addresses one can listen on.
func TestFreeAddrs(t *testing.T) {
	addrs, err := FreeAddrs(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] || !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("addresses %v: want distinct loopback ones", addrs)
		}
		seen[a] = true
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		ln.Close()
	}
	if len(addrs) != 5 {
		t.Fatalf("%d addresses, want 5", len(addrs))
	}
}

// Exit describes itself as exec does, and a clean exit plainly.
func TestExitString(t *testing.T) {
	if got := (Exit{}).String(); got != "exit status 0" {
		t.Errorf("clean exit reads %q", got)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=exit", "NODEPROC_TEST_CODE=4")
	if got := (Exit{Err: cmd.Run()}).String(); got != "exit status 4" {
		t.Errorf("exit with status 4 reads %q", got)
	}
	if got := (Exit{Err: errors.New("signal: killed")}).String(); got != "signal: killed" {
		t.Errorf("exit by signal reads %q", got)
	}
}
