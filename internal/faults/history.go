package faults

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Outcome is the result of a client operation.
type Outcome string

// Outcomes.
const (
	// OK: the append was acknowledged at Op.Offset.
	OK Outcome = "ok"
	// Failed: the node said the append was definitely not made.
	Failed Outcome = "failed"
	// Unknown: it may or may not have been made (timeout, connection
	// error, or the node said "unknown").
	Unknown Outcome = "unknown"
)

// Op is one append attempt by a client.
type Op struct {
	// ID is the op's index in History.Ops.
	ID int
	// Process is the appender that made it (-1 for the harness's own
	// post-heal appends).
	Process int
	// Node is the node the request was sent to.
	Node string
	// Payload is the record; unique per logical append.
	Payload string
	// Attempt is 0 for the first try of Payload, n for its n-th retry
	// (made only after an unknown or failed outcome).
	Attempt int
	// Key is the Idempotency-Key the request carried ("" for none): the
	// same for every attempt of a payload, so that the node appends it
	// at most once (R63, R64).
	Key string
	// Invoke and Complete are monotonic times since the run started.
	Invoke, Complete time.Duration
	Outcome          Outcome
	// Offset is the acknowledged offset (Outcome OK only).
	Offset uint64
	// Err is the error text for failed and unknown ops.
	Err string
	// Replayed is set when the node answered an acknowledged op as a
	// duplicate of an earlier append with the same Key (Offset is then
	// that append's).
	Replayed bool
	// Cause says why an Unknown op's outcome is unknown (Cause*).
	Cause string
}

// Causes of an unknown outcome, as the harness tells them apart.
const (
	// CauseTimeout: the node answered that the append's context expired
	// before the outcome was known (504, code "timeout"): one of the two
	// causes the library leaves (R67: it retries until the caller stops
	// waiting).
	CauseTimeout = "node-timeout"
	// CauseNodeClosing: the node's Log closed before the outcome was
	// known (503 "closing": a SIGTERM, as in a rolling restart), the
	// other cause R67 leaves.
	CauseNodeClosing = "node-closing"
	// CauseNodeUnknown: the node answered another unknown outcome (the
	// leader changing with idempotence disabled; a failed disk).
	CauseNodeUnknown = "node-unknown"
	// CauseClientTimeout: the harness's own request deadline passed (a
	// paused node, or a partition that hides the answer).
	CauseClientTimeout = "client-timeout"
	// CauseConnection: the connection broke before an answer (a killed
	// node), or the answer was unreadable.
	CauseConnection = "connection"
)

func (o Op) String() string {
	s := fmt.Sprintf("op#%d p%d %s %q try%d [%.3fs..%.3fs] %s", o.ID, o.Process, o.Node, o.Payload,
		o.Attempt, o.Invoke.Seconds(), o.Complete.Seconds(), o.Outcome)
	if o.Outcome == OK {
		s += fmt.Sprintf("@%d", o.Offset)
		if o.Replayed {
			s += " (duplicate: the original's offset)"
		}
	}
	if o.Cause != "" {
		s += " [" + o.Cause + "]"
	}
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

// Read is one entry a tailing reader saw. A reader's reads are recorded in
// the order it saw them; each of its sessions starts right after the last
// offset it saw (0 at first), so its offsets must only grow.
//
// A Reset read is no entry: the node answered that the reader's next
// offset (From) is below its log start (deleted by retention), and the
// reader resumes from that log start (Offset), as a consumer with Kafka's
// auto.offset.reset=earliest does. The offsets in between are the only
// ones a reader may skip.
type Read struct {
	// Reader is the reader's number; Session counts its connections.
	Reader, Session int
	// Node served the read.
	Node    string
	Offset  uint64
	Payload string
	// Reset marks a jump to the log start Offset from From.
	Reset bool
	From  uint64
	// Time is monotonic time since the run started.
	Time time.Duration
}

func (r Read) String() string {
	if r.Reset {
		return fmt.Sprintf("read r%d.s%d %s reset @%d: below the log start %d at %.3fs", r.Reader, r.Session, r.Node, r.From, r.Offset, r.Time.Seconds())
	}
	return fmt.Sprintf("read r%d.s%d %s @%d=%q at %.3fs", r.Reader, r.Session, r.Node, r.Offset, r.Payload, r.Time.Seconds())
}

// DeleteOp is one POST /delete-before a deleter made.
type DeleteOp struct {
	Node string
	// Requested is the offset asked for; LogStart and HW are the node's
	// answer (LogStart also on errors, when the node said it).
	Requested, LogStart, HW uint64
	// Code is the HTTP status (0: no answer); Err the error text.
	Code int
	Err  string
	// Invoke and Complete are monotonic times since the run started.
	Invoke, Complete time.Duration
}

func (d DeleteOp) String() string {
	s := fmt.Sprintf("delete-before %s %d [%.3fs..%.3fs] %d log_start=%d hw=%d", d.Node, d.Requested,
		d.Invoke.Seconds(), d.Complete.Seconds(), d.Code, d.LogStart, d.HW)
	if d.Err != "" {
		s += " (" + d.Err + ")"
	}
	return s
}

// Event is a nemesis action.
type Event struct {
	Time time.Duration
	// Kind: kill, restart, pause, resume, partition, heal, ...
	Kind string
	// Nodes are the nodes affected.
	Nodes []string
	// Leader is set when the action targeted the node then leading.
	Leader bool
	Detail string
}

func (e Event) String() string {
	s := fmt.Sprintf("%.3fs %s %v", e.Time.Seconds(), e.Kind, e.Nodes)
	if e.Leader {
		s += " (leader)"
	}
	if e.Detail != "" {
		s += " " + e.Detail
	}
	return s
}

// StatusSample is one /status answer, polled during the run.
type StatusSample struct {
	Time time.Duration
	Node string
	// Incarnation counts the node's process starts: HW may restart lower
	// after a restart (from its checkpoint), never within one process.
	Incarnation int
	// Wipes counts the times the node's data directory was deleted before
	// the sample: a wiped node starts over (epoch, log start, HW).
	Wipes             int
	Role              string
	Epoch             uint64
	LeaderID          string
	LEO, HW, LogStart uint64
}

func (s StatusSample) String() string {
	return fmt.Sprintf("status %s#%d.w%d at %.3fs: %s epoch=%d leader=%q log_start=%d leo=%d hw=%d",
		s.Node, s.Incarnation, s.Wipes, s.Time.Seconds(), s.Role, s.Epoch, s.LeaderID, s.LogStart, s.LEO, s.HW)
}

// LogEntry is one committed entry in a node's final log.
type LogEntry struct {
	Offset  uint64
	Epoch   uint64
	Payload string
}

// FinalLog is what a node serves once the cluster is healed and quiet:
// every committed entry from its log start (/entries?follow=false), its
// HW and its log start (0 unless retention deleted a prefix).
type FinalLog struct {
	Node     string
	HW       uint64
	LogStart uint64
	Entries  []LogEntry
}

// History records a run. Its methods are safe for concurrent use; the
// exported fields may be read directly once the run is over.
type History struct {
	start time.Time

	mu       sync.Mutex
	Ops      []Op
	Reads    []Read
	Events   []Event
	Statuses []StatusSample
	Deletes  []DeleteOp
}

// NewHistory starts a history whose clock reads 0 now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now returns the monotonic time since the history started.
func (h *History) Now() time.Duration { return time.Since(h.start) }

// Invoke records the start of an op and returns its ID.
func (h *History) Invoke(process int, node, payload string, attempt int) int {
	return h.InvokeKey(process, node, payload, "", attempt)
}

// InvokeKey is Invoke for a request carrying Idempotency-Key key.
func (h *History) InvokeKey(process int, node, payload, key string, attempt int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := len(h.Ops)
	h.Ops = append(h.Ops, Op{ID: id, Process: process, Node: node, Payload: payload, Key: key,
		Attempt: attempt, Invoke: h.Now(), Outcome: Unknown, Err: "not completed"})
	return id
}

// Complete records an op's end.
func (h *History) Complete(id int, outcome Outcome, offset uint64, errText string) {
	h.CompleteAppend(id, AppendResult{Outcome: outcome, Offset: offset, Err: errText})
}

// CompleteAppend records an op's end from Cluster.AppendKey's result.
func (h *History) CompleteAppend(id int, r AppendResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op := &h.Ops[id]
	op.Complete, op.Outcome, op.Offset, op.Err, op.Replayed, op.Cause = h.Now(), r.Outcome, r.Offset, r.Err, r.Replayed, r.Cause
}

// AddRead records an entry a reader saw.
func (h *History) AddRead(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Time = h.Now()
	h.Reads = append(h.Reads, r)
}

// AddStatus records a polled status.
func (h *History) AddStatus(s StatusSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.Time = h.Now()
	h.Statuses = append(h.Statuses, s)
}

// AddDelete records a finished /delete-before (Invoke set by the caller).
func (h *History) AddDelete(d DeleteOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d.Complete = h.Now()
	h.Deletes = append(h.Deletes, d)
}

// AddEvent records a nemesis action.
func (h *History) AddEvent(e Event) Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Time = h.Now()
	h.Events = append(h.Events, e)
	return e
}

// Counts returns the number of ops per outcome.
func (h *History) Counts() map[Outcome]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[Outcome]int{}
	for _, o := range h.Ops {
		m[o.Outcome]++
	}
	return m
}

// Failovers returns, for every kill of the node then leading, the time
// from the kill to the first acknowledgement of an append invoked after it
// (appends already in flight at the old leader do not count). Kills with no
// later acknowledged append, and crash-majority kills (no quorum until the
// restarts), are left out.
func Failovers(ops []Op, events []Event) []time.Duration {
	var out []time.Duration
	for _, e := range events {
		if !e.Leader || e.Kind != "kill" || strings.HasPrefix(e.Detail, "crash-majority") {
			continue
		}
		best := time.Duration(-1)
		for _, o := range ops {
			if o.Outcome == OK && o.Invoke > e.Time && (best < 0 || o.Complete < best) {
				best = o.Complete
			}
		}
		if best >= 0 {
			out = append(out, best-e.Time)
		}
	}
	return out
}

// LeaderFaultGaps returns, for every event of kind that hit the node then
// leading (Event.Leader), the time from the event to the completion of the
// first acknowledged append invoked after it: the fail-over as a client
// sees it. Failovers is this for kills, but for crash-majority's.
func LeaderFaultGaps(ops []Op, events []Event, kind string) []time.Duration {
	var out []time.Duration
	for _, e := range events {
		if !e.Leader || e.Kind != kind {
			continue
		}
		best := time.Duration(-1)
		for _, o := range ops {
			if o.Outcome == OK && o.Invoke > e.Time && (best < 0 || o.Complete < best) {
				best = o.Complete
			}
		}
		if best >= 0 {
			out = append(out, best-e.Time)
		}
	}
	return out
}

// RollingGap is one restart of a rolling restart: the node, whether it
// led when it got SIGTERM, and the longest time without an acknowledged
// append around it.
type RollingGap struct {
	Node   string
	Leader bool
	Gap    time.Duration
}

// RollingGaps returns, for every "terminate" event followed by its node's
// "rejoined" event, the longest interval between two consecutive
// acknowledgements (by completion time) that overlaps the restart, from
// SIGTERM to the node back and caught up.
func RollingGaps(ops []Op, events []Event) []RollingGap {
	var acks []time.Duration
	for _, o := range ops {
		if o.Outcome == OK {
			acks = append(acks, o.Complete)
		}
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i] < acks[j] })
	var out []RollingGap
	for i, e := range events {
		if e.Kind != "terminate" || len(e.Nodes) != 1 {
			continue
		}
		end := time.Duration(-1)
		for _, f := range events[i+1:] {
			if f.Kind == "rejoined" && len(f.Nodes) == 1 && f.Nodes[0] == e.Nodes[0] {
				end = f.Time
				break
			}
		}
		if end < 0 {
			continue
		}
		g := RollingGap{Node: e.Nodes[0], Leader: e.Leader}
		for k := 1; k < len(acks); k++ {
			if acks[k] >= e.Time && acks[k-1] <= end {
				g.Gap = max(g.Gap, acks[k]-acks[k-1])
			}
		}
		out = append(out, g)
	}
	return out
}

// Percentile returns the p-th percentile (0..1) of ds by nearest rank, 0
// for none. It sorts ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(p*float64(len(ds)-1) + 0.5)
	return ds[i]
}
