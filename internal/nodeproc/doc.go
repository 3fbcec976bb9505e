// Package nodeproc supervises node processes: the children that the
// example's demo mode and the fault harness start, kill, pause and restart.
//
// A Supervisor starts every child from one OS thread locked for that
// purpose, so that on Linux the child's parent-death signal (SIGKILL)
// fires only when the supervising process dies, never because the Go
// runtime retired the thread that happened to start it. Each child runs
// in a process group of its own: a terminal's Ctrl-C reaches only the
// parent (which then stops its children in order), and a kill reaches
// anything the child spawned.
//
// A Process is one restartable child: the same command line, started any
// number of times (each start an incarnation, counted), one incarnation
// at a time. It can be killed (SIGKILL), terminated (SIGTERM), paused
// (SIGSTOP) and resumed (SIGCONT), and tells how each incarnation ended
// (Exit), including whether the supervisor asked for that end or the
// child exited on its own (a crash, for a harness).
//
// Off Linux there is no parent-death signal and no process group:
// children outlive a parent killed by SIGKILL (a graceful stop still
// stops them), signals go to the child alone, and Pause and Resume are
// not supported.
package nodeproc
