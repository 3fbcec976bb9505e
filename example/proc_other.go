//go:build !linux

package main

import (
	"os"
	"syscall"
)

// childSysProcAttr: without Linux's Pdeathsig, nodes outlive a parent
// killed by SIGKILL; a graceful stop of the demo still stops them.
func childSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// killProcess kills p.
func killProcess(p *os.Process) error { return p.Kill() }
