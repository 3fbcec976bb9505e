package nodeproc

import (
	"os"
	"syscall"
)

type procSignal = syscall.Signal

const (
	sigKill  = syscall.SIGKILL
	sigTerm  = syscall.SIGTERM
	sigStop  = syscall.SIGSTOP
	sigCont  = syscall.SIGCONT
	sigUser1 = syscall.SIGUSR1
)

// sysProcAttr puts a child in its own process group and has the kernel
// kill it when the thread that started it (the Supervisor's, which lives
// as long as the parent process or the Supervisor) dies, even by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// sendSignal signals p's process group, or p alone if that fails (a
// group that is gone while p is still to be reaped).
func sendSignal(p *os.Process, sig procSignal) error {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		return p.Signal(sig)
	}
	return nil
}
