package replog

import (
	"fmt"
	"os"
	"sync"
)

// openDirs are the data directories this process's open Logs hold, so
// that a second Open of one can say that this process holds it: the
// directory's lock looks the same whoever holds it.
var openDirs dirRegistry

// dirRegistry is a set of held directories, known by file identity
// (os.SameFile), so that another spelling of a path is the same directory.
type dirRegistry struct {
	mu   sync.Mutex
	next uint64
	held []heldDir
}

type heldDir struct {
	token uint64
	dir   os.FileInfo
	node  string
}

// add records that node holds dir, and returns the function that forgets
// it (safe to call more than once). A directory that cannot be stat'ed is
// not recorded.
func (r *dirRegistry) add(dir, node string) func() {
	fi, err := os.Stat(dir)
	if err != nil {
		return func() {}
	}
	r.mu.Lock()
	r.next++
	token := r.next
	r.held = append(r.held, heldDir{token: token, dir: fi, node: node})
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, h := range r.held {
				if h.token == token {
					r.held = append(r.held[:i], r.held[i+1:]...)
					return
				}
			}
		})
	}
}

// holder returns the node of the Log in this process that holds dir, if
// one does.
func (r *dirRegistry) holder(dir string) (string, bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.held {
		if os.SameFile(h.dir, fi) {
			return h.node, true
		}
	}
	return "", false
}

// lockedError is Open's error for a data directory another Log holds: one
// message that names the directory, the node and the holder, wrapping the
// store's error (and so ErrLocked).
type lockedError struct {
	dir, node string
	holder    string // the node of the Log in this process that holds it; "" for another process
	inProcess bool
	err       error
}

// lockedErr is the error of node's Open of dir, which the store refused
// with err (wrapping ErrLocked).
func lockedErr(dir, node string, err error) error {
	holder, ok := openDirs.holder(dir)
	return &lockedError{dir: dir, node: node, holder: holder, inProcess: ok, err: err}
}

func (e *lockedError) Error() string {
	if e.inProcess {
		return fmt.Sprintf("replog: node %s cannot open directory %s: it is locked by another Log in this process (node %s): close that Log first, or give each Log its own Dir", e.node, e.dir, e.holder)
	}
	return fmt.Sprintf("replog: node %s cannot open directory %s: it is locked by another process (a node or a tool that has it open)", e.node, e.dir)
}

// Unwrap returns the store's error, which wraps ErrLocked.
func (e *lockedError) Unwrap() error { return e.err }
