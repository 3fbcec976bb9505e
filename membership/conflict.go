package membership

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// Two processes with one node ID. memberlist keeps the first address it
// learned for a name and refuses another while the first is alive
// ("Conflicting address", which it only logs), so the second process
// would run beside the first, both replicating as one node. Each side
// learns of the other through memberlist's conflict delegate: the
// newcomer while it joins (the seed's state lists the live node under its
// name), the running node when the newcomer's state reaches it.
//
// A conflict is not always a duplicate: a node that restarted on another
// gossip address (a new port or IP) is still listed at the old one until
// gossip declares it dead. The two differ in that a duplicate answers: a
// memberlist ping addressed to this node's name at the other address is
// acknowledged only by a live memberlist of that name. So a conflict is
// checked by pinging (conflictCheckTime at most): answered, it is a
// duplicate; unanswered, a leftover.

// conflictCheckTime bounds how long a conflict is checked by pings (each
// waits Tuning.ProbeTimeout).
const conflictCheckTime = time.Second

// conflictState records the addresses that claimed this node's ID.
type conflictState struct {
	mu      sync.Mutex
	seen    map[string]bool // other gossip addresses, checked or being checked
	started bool            // New has checked those seen while joining
	pending []string        // seen before started: New checks them
	found   uint64          // live duplicates found
	wg      sync.WaitGroup  // checks running after New
	// closed: Close has begun; no check starts after it (set under mu
	// before Close waits on wg, so no wg.Add can race that Wait).
	closed bool
}

// Conflicts returns how many live duplicates of this node (other
// processes using its node ID) it has found since New. Each is logged at
// Error.
func (m *Membership) Conflicts() uint64 {
	m.conflicts.mu.Lock()
	defer m.conflicts.mu.Unlock()
	return m.conflicts.found
}

// NotifyConflict is memberlist's report that a member claims a name
// already known at another address. Called with memberlist's locks held:
// it must not call into memberlist, so the check runs elsewhere.
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	m := (*Membership)(d)
	if existing.Name != m.cfg.NodeID {
		// Two others share a name: they check it themselves (this is also
		// how a restart on a new address looks until the old one is dead).
		m.logger.Debug("two members claim one node ID", "member", existing.Name,
			"known_addr", existing.Address(), "other_addr", other.Address())
		return
	}
	addr := other.Address()
	c := &m.conflicts
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[addr] || c.closed || m.closing.Load() {
		return
	}
	if c.seen == nil {
		c.seen = make(map[string]bool)
	}
	c.seen[addr] = true
	if !c.started {
		c.pending = append(c.pending, addr)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		m.checkConflict(addr)
	}()
}

// checkConflictsAtStart checks the conflicts seen while New joined: a
// live duplicate makes New fail with ErrDuplicateNodeID.
func (m *Membership) checkConflictsAtStart() error {
	c := &m.conflicts
	c.mu.Lock()
	c.started = true
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, addr := range pending {
		if m.checkConflict(addr) {
			return fmt.Errorf("%w: node ID %q is in use by a live member at gossip address %s (this node's is %s): "+
				"give every node its own ID, or stop the other process", ErrDuplicateNodeID, m.cfg.NodeID, addr, m.gossipAddr)
		}
	}
	return nil
}

// checkConflict pings this node's name at addr and reports whether a live
// member answered; a live one is logged at Error and counted.
func (m *Membership) checkConflict(addr string) bool {
	udp, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		m.logger.Debug("cannot check a member claiming this node's ID", "other_addr", addr, "error", err)
		return false
	}
	deadline := time.Now().Add(max(conflictCheckTime, 3*m.tuning.ProbeTimeout))
	for time.Now().Before(deadline) && !m.closing.Load() {
		if _, err := m.list.Ping(m.cfg.NodeID, udp); err != nil {
			var noAck memberlist.NoPingResponseError
			if !errors.As(err, &noAck) {
				// The send failed (closing, or no route): try again until
				// the deadline, as after a lost ping.
				time.Sleep(m.tuning.ProbeTimeout)
			}
			continue
		}
		m.conflicts.mu.Lock()
		m.conflicts.found++
		m.conflicts.mu.Unlock()
		m.logger.Error("another live process uses this node's ID: two nodes with one ID break replication; stop one of them, or give it its own ID",
			"node", m.cfg.NodeID, "other_gossip_addr", addr, "gossip_addr", m.gossipAddr)
		return true
	}
	m.logger.Debug("a member claiming this node's ID does not answer: a leftover of an earlier run, until gossip declares it dead",
		"node", m.cfg.NodeID, "other_gossip_addr", addr)
	return false
}

// memberlistLog turns memberlist's log lines ("[ERR] memberlist: ...")
// into records of the hclog logger at the level they name, and lowers
// two kinds that are expected: errors about memberlist's own closed
// sockets once Close has begun (its goroutines may still be sending), and
// "Conflicting address" (NotifyConflict checks it and logs what it
// found).
type memberlistLog struct {
	m   *Membership
	log hclog.Logger
}

var memberlistLevels = []struct {
	prefix string
	level  hclog.Level
}{
	{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
	{"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error},
}

func (w *memberlistLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := hclog.Info
	for _, l := range memberlistLevels {
		if rest, ok := strings.CutPrefix(msg, l.prefix); ok {
			msg, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	switch {
	case level > hclog.Debug && w.m.closing.Load() && strings.Contains(msg, net.ErrClosed.Error()):
		level = hclog.Debug
	case strings.HasPrefix(msg, "Conflicting address for "):
		level = hclog.Debug
	}
	w.log.Log(level, msg)
	return len(p), nil
}

// oneLine formats err on one line: memberlist's join error lists each
// seed's failure on lines of its own.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	var errs []error
	if me, ok := err.(interface{ WrappedErrors() []error }); ok {
		errs = me.WrappedErrors()
	} else if je, ok := err.(interface{ Unwrap() []error }); ok {
		errs = je.Unwrap()
	}
	if len(errs) == 0 {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = strings.Join(strings.Fields(e.Error()), " ")
	}
	return strings.Join(parts, "; ")
}
