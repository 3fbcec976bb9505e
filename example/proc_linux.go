package main

import (
	"os"
	"syscall"
)

// childSysProcAttr puts a node in its own process group (so a terminal's
// Ctrl-C reaches only the demo parent, which stops the nodes in order) and
// has the kernel kill it if the parent dies, even by SIGKILL.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killProcess sends SIGKILL to p's process group.
func killProcess(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		return p.Kill()
	}
	return nil
}
