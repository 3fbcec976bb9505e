//go:build !linux

package nodeproc

import (
	"errors"
	"os"
	"syscall"
)

type procSignal int

const (
	sigKill procSignal = iota
	sigTerm
	sigStop
	sigCont
	sigUser1
)

// sysProcAttr: without Linux's Pdeathsig, children outlive a parent killed
// by SIGKILL; a graceful stop of the parent still stops them.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// sendSignal signals p alone (no process group off Linux); pausing is not
// supported, nor SIGUSR1.
func sendSignal(p *os.Process, sig procSignal) error {
	switch sig {
	case sigKill:
		return p.Kill()
	case sigTerm:
		return p.Signal(syscall.SIGTERM)
	default:
		return errors.ErrUnsupported
	}
}
