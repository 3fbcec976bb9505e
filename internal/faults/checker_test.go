package faults

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// cleanRun is a small hand-made run with no anomaly: offset 1 is a control
// entry (readers skip it), "b" (unknown) is absent, "c" (unknown) present,
// "d" failed and absent, "f" was retried after an unknown outcome and
// landed once.
func cleanRun() ([]Op, []Read, []FinalLog) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ops := []Op{
		{ID: 0, Process: 0, Node: "n1", Payload: "a", Invoke: ms(0), Complete: ms(5), Outcome: OK, Offset: 0},
		{ID: 1, Process: 1, Node: "n2", Payload: "b", Invoke: ms(1), Complete: ms(900), Outcome: Unknown, Err: "timeout"},
		{ID: 2, Process: 2, Node: "n3", Payload: "c", Invoke: ms(2), Complete: ms(900), Outcome: Unknown, Err: "timeout"},
		{ID: 3, Process: 0, Node: "n1", Payload: "d", Invoke: ms(10), Complete: ms(11), Outcome: Failed, Err: "no leader"},
		{ID: 4, Process: 0, Node: "n2", Payload: "e", Invoke: ms(950), Complete: ms(960), Outcome: OK, Offset: 3},
		{ID: 5, Process: 1, Node: "n1", Payload: "f", Invoke: ms(970), Complete: ms(990), Outcome: Unknown, Err: "EOF"},
		{ID: 6, Process: 1, Node: "n3", Payload: "f", Attempt: 1, Invoke: ms(1000), Complete: ms(1010), Outcome: OK, Offset: 4},
	}
	entries := []LogEntry{{0, 1, "a"}, {2, 2, "c"}, {3, 2, "e"}, {4, 2, "f"}}
	var finals []FinalLog
	for _, n := range []string{"n1", "n2", "n3"} {
		finals = append(finals, FinalLog{Node: n, HW: 5, Entries: append([]LogEntry(nil), entries...)})
	}
	reads := []Read{
		{Reader: 0, Session: 0, Node: "n1", Offset: 0, Payload: "a"},
		{Reader: 1, Session: 0, Node: "n2", Offset: 0, Payload: "a"},
		{Reader: 0, Session: 0, Node: "n1", Offset: 2, Payload: "c"},
		{Reader: 1, Session: 1, Node: "n3", Offset: 2, Payload: "c"},
		{Reader: 0, Session: 1, Node: "n2", Offset: 3, Payload: "e"},
		{Reader: 0, Session: 1, Node: "n2", Offset: 4, Payload: "f"},
	}
	return ops, reads, finals
}

func checkKinds(t *testing.T, res Result, want map[string]int) {
	t.Helper()
	for k, n := range want {
		if res.Counts[k] != n {
			var b strings.Builder
			res.Print(&b, 10)
			t.Errorf("%s: got %d anomalies, want %d\n%s", k, res.Counts[k], n, b.String())
		}
	}
}

func TestCheckerCleanHistoryPasses(t *testing.T) {
	ops, reads, finals := cleanRun()
	res := Check(ops, reads, finals)
	if !res.OK() {
		var b strings.Builder
		res.Print(&b, 10)
		t.Fatalf("clean history flagged:\n%s", b.String())
	}
}

func TestCheckerLostWriteMissingOnOneNode(t *testing.T) {
	ops, reads, finals := cleanRun()
	// n3 lost offsets 3 and 4 (e.g. truncated to its HW on restart).
	finals[2].Entries = finals[2].Entries[:2]
	finals[2].HW = 3
	res := Check(ops, reads, finals)
	// "e"@3 and "f"@4 were both acked.
	checkKinds(t, res, map[string]int{LostWrite: 2, NotConverged: 1, InconsistentOffset: 0})
	for _, a := range res.Anomalies {
		if a.Kind == LostWrite && a.Offset == 3 {
			if len(a.Ops) != 1 || a.Ops[0].ID != 4 || !strings.Contains(a.Detail, "n3 has nothing") {
				t.Errorf("lost write does not name the op and node: %v", a)
			}
		}
	}
}

func TestCheckerLostWriteReplacedEverywhere(t *testing.T) {
	ops, reads, finals := cleanRun()
	// Every node has "b" (unknown, allowed) where "e" was acked: the ack
	// came from a leader that lost the entry.
	reads = reads[:5] // the reader saw only "e"... drop its last read
	for i := range finals {
		finals[i].Entries[2] = LogEntry{3, 3, "b"}
	}
	res := Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{LostWrite: 1, UncommittedRead: 1, InconsistentOffset: 1, NotConverged: 0})
}

func TestCheckerInconsistentOffsets(t *testing.T) {
	ops, reads, finals := cleanRun()
	finals[1].Entries[1] = LogEntry{2, 2, "b"}
	res := Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{InconsistentOffset: 1, NotConverged: 1, LostWrite: 0})
	// Both readers saw "c"@2; n2 finally has "b" there.
	checkKinds(t, res, map[string]int{UncommittedRead: 2})
}

func TestCheckerNonMonotonicReads(t *testing.T) {
	ops, reads, finals := cleanRun()
	back := append(append([]Read(nil), reads...), Read{Reader: 0, Session: 2, Node: "n3", Offset: 2, Payload: "c"})
	checkKinds(t, Check(ops, back, finals), map[string]int{NonMonotonicRead: 1, UncommittedRead: 0})

	// Reader 2 jumps from 0 to 3, over committed "c"@2.
	skip := append(append([]Read(nil), reads...),
		Read{Reader: 2, Node: "n1", Offset: 0, Payload: "a"},
		Read{Reader: 2, Node: "n1", Offset: 3, Payload: "e"})
	res := Check(ops, skip, finals)
	checkKinds(t, res, map[string]int{NonMonotonicRead: 1})
	if a := res.Anomalies[0]; !strings.Contains(a.Detail, "skipped committed offsets 2") || len(a.Reads) != 2 {
		t.Errorf("skip anomaly: %v", a)
	}
}

func TestCheckerUncommittedRead(t *testing.T) {
	ops, reads, finals := cleanRun()
	// A reader saw "b" at offset 5, which no final log has (an entry above
	// the real HW, later truncated).
	reads = append(reads, Read{Reader: 0, Session: 1, Node: "n2", Offset: 5, Payload: "b"})
	res := Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{UncommittedRead: 1, NonMonotonicRead: 0, LostWrite: 0})
}

func TestCheckerDuplicates(t *testing.T) {
	ops, reads, finals := cleanRun()
	// "c" (one unknown try, never retried) lands twice.
	for i := range finals {
		finals[i].Entries = append(finals[i].Entries, LogEntry{5, 2, "c"})
		finals[i].HW = 6
	}
	checkKinds(t, Check(ops, reads, finals), map[string]int{Duplicate: 1, DuplicateRetried: 0})

	// "f" was retried after an unknown outcome: a duplicate counted apart.
	ops, reads, finals = cleanRun()
	for i := range finals {
		finals[i].Entries = append(finals[i].Entries, LogEntry{5, 2, "f"})
		finals[i].HW = 6
	}
	res := Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{Duplicate: 0, DuplicateRetried: 1})
	if !res.OK() {
		t.Errorf("a duplicate after retrying an unknown outcome is tolerated, got %d violations", res.Violations())
	}

	// The same, but every attempt of "f" carried one Idempotency-Key:
	// the node had to append it once, so it is a violation.
	ops, reads, finals = cleanRun()
	ops[5].Key, ops[6].Key = "f", "f"
	for i := range finals {
		finals[i].Entries = append(finals[i].Entries, LogEntry{5, 2, "f"})
		finals[i].HW = 6
	}
	res = Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{Duplicate: 1, DuplicateRetried: 0})
	if res.OK() {
		t.Errorf("a duplicate of an append retried with its idempotency key must be a violation")
	}

	// A retry answered as a duplicate names the original's offset: "f"
	// at 4, once. Naming another offset is a lost write.
	ops, reads, finals = cleanRun()
	ops[5].Key, ops[6].Key = "f", "f"
	ops[6].Replayed = true
	checkKinds(t, Check(ops, reads, finals), map[string]int{Duplicate: 0, DuplicateRetried: 0, LostWrite: 0})
	ops[6].Offset = 3
	if res := Check(ops, reads, finals); res.Counts[LostWrite] == 0 {
		t.Errorf("a duplicate's answer naming another payload's offset went unnoticed: %s", res.Summary())
	}

	// The original may precede appends acknowledged before the retry
	// was invoked: no real-time order violation for a replayed answer.
	// Here "f"'s first attempt (invoked at 2 ms, unknown) appended it at
	// 2; its retry at 1000 ms, after "e" was acknowledged at 3, is
	// answered with offset 2.
	ops, reads, finals = cleanRun()
	ops[2].Payload, ops[2].Process = "f", 1
	ops[2].Key, ops[5].Key, ops[6].Key = "f", "f", "f"
	ops[5].Attempt, ops[6].Attempt = 1, 2
	ops[6].Replayed, ops[6].Offset = true, 2
	for i := range finals {
		finals[i].Entries = []LogEntry{{0, 1, "a"}, {2, 2, "f"}, {3, 2, "e"}}
	}
	reads[2].Payload, reads[3].Payload = "f", "f"
	reads = reads[:5]
	res = Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{RealTimeOrder: 0})
	if !res.OK() {
		t.Errorf("a replayed answer with the first attempt's offset: %s", res.Summary())
	}
	ops[6].Replayed = false // a fresh append at 2 after "e" at 3: out of order
	checkKinds(t, Check(ops, reads, finals), map[string]int{RealTimeOrder: 1})

	// A retry after a *failed* attempt must not duplicate: "failed" means
	// "not appended".
	ops, reads, finals = cleanRun()
	ops[3].Outcome = Failed
	ops = append(ops, Op{ID: 7, Process: 0, Node: "n2", Payload: "d", Attempt: 1, Outcome: OK, Offset: 5})
	for i := range finals {
		finals[i].Entries = append(finals[i].Entries, LogEntry{5, 2, "d"}, LogEntry{6, 2, "d"})
		finals[i].HW = 7
	}
	res = Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{Duplicate: 1, DuplicateRetried: 0})
	if res.OK() {
		t.Errorf("a duplicate without an unknown outcome must be a violation")
	}
}

func TestCheckerFailedAndPhantomWrites(t *testing.T) {
	ops, reads, finals := cleanRun()
	for i := range finals {
		finals[i].Entries = append(finals[i].Entries, LogEntry{5, 2, "d"}, LogEntry{6, 2, "zz"})
		finals[i].HW = 7
	}
	checkKinds(t, Check(ops, reads, finals), map[string]int{FailedPresent: 1, Phantom: 1})
}

func TestFailovers(t *testing.T) {
	s := time.Second
	ops := []Op{
		{ID: 0, Invoke: 1 * s, Complete: 3 * s, Outcome: OK}, // in flight at the kill: ignored
		{ID: 1, Invoke: 4 * s, Complete: 7 * s, Outcome: OK},
		{ID: 2, Invoke: 5 * s, Complete: 6 * s, Outcome: OK},
		{ID: 3, Invoke: 9 * s, Complete: 9*s + s/2, Outcome: Unknown},
	}
	events := []Event{
		{Time: 2 * s, Kind: "kill", Leader: true},
		{Time: 2 * s, Kind: "kill"},               // not the leader
		{Time: 8 * s, Kind: "kill", Leader: true}, // nothing acked after it
		// A crash of the majority waits for restarts, not an election.
		{Time: 3 * s, Kind: "kill", Leader: true, Detail: "crash-majority right after an ack"},
	}
	got := Failovers(ops, events)
	if len(got) != 1 || got[0] != 4*s {
		t.Fatalf("Failovers = %v, want [4s]", got)
	}
	if p := Percentile([]time.Duration{3, 1, 2}, 0.5); p != 2 {
		t.Fatalf("median = %v", p)
	}
}

func TestCheckerRealTimeOrder(t *testing.T) {
	ops, reads, finals := cleanRun()
	// "f" was acked at 4 (at 1.01s); "g", invoked afterwards, is acked at
	// offset 1, below it. (The final logs are made to agree so that only
	// the order is wrong.)
	ops = append(ops, Op{ID: 7, Process: 2, Node: "n1", Payload: "g", Invoke: 2 * time.Second, Complete: 3 * time.Second, Outcome: OK, Offset: 1})
	for i := range finals {
		finals[i].Entries = []LogEntry{{0, 1, "a"}, {1, 1, "g"}, {2, 2, "c"}, {3, 2, "e"}, {4, 2, "f"}}
	}
	res := Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{RealTimeOrder: 1, LostWrite: 0})
	for _, a := range res.Anomalies {
		if a.Kind == RealTimeOrder && (len(a.Ops) != 2 || a.Ops[0].Payload != "f" || a.Ops[1].Payload != "g") {
			t.Errorf("anomaly does not name both ops: %v", a)
		}
	}
}

func TestCheckStatuses(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	clean := []StatusSample{
		{Time: ms(0), Node: "n1", Incarnation: 1, Role: "leader", Epoch: 1, LEO: 5, HW: 5},
		{Time: ms(0), Node: "n2", Incarnation: 1, Role: "follower", Epoch: 1, LEO: 5, HW: 4},
		{Time: ms(100), Node: "n1", Incarnation: 1, Role: "leader", Epoch: 1, LEO: 7, HW: 6},
		// n2 restarted: its HW starts from an older checkpoint, allowed.
		{Time: ms(100), Node: "n2", Incarnation: 2, Role: "follower", Epoch: 1, LEO: 5, HW: 2},
		{Time: ms(200), Node: "n2", Incarnation: 2, Role: "leader", Epoch: 2, LEO: 8, HW: 6},
	}
	if as := CheckStatuses(clean); len(as) != 0 {
		t.Fatalf("clean statuses flagged: %v", as)
	}
	bad := append(append([]StatusSample(nil), clean...),
		StatusSample{Time: ms(300), Node: "n1", Incarnation: 1, Role: "leader", Epoch: 2, LEO: 9, HW: 6},   // second leader of epoch 2
		StatusSample{Time: ms(300), Node: "n2", Incarnation: 2, Role: "follower", Epoch: 1, LEO: 8, HW: 5}, // epoch and HW down
		StatusSample{Time: ms(400), Node: "n3", Incarnation: 1, Role: "follower", Epoch: 2, LEO: 3, HW: 4}, // HW above LEO
	)
	var res Result
	res.Merge(CheckStatuses(bad))
	checkKinds(t, res, map[string]int{TwoLeaders: 1, EpochRegression: 1, HWRegression: 2})
}

func TestPayloadRoundTripAndCorruption(t *testing.T) {
	for _, n := range []int{0, 1, 63, 5000} {
		rec := EncodePayload("a3-17", n)
		if got := DecodePayload(rec); got != "a3-17" {
			t.Fatalf("size %d: decoded %q", n, got)
		}
		if n == 0 {
			continue
		}
		flipped := []byte(rec)
		flipped[len(flipped)-1] ^= 1
		for _, bad := range []string{string(flipped), rec[:len(rec)-1], EncodePayload("a3-18", n)[:6] + rec[6:]} {
			if got := DecodePayload(bad); !strings.HasPrefix(got, "corrupt:") {
				t.Errorf("size %d: damaged record decoded as %q", n, got)
			}
		}
	}
	// Another id's intact record decodes to that id, never to this one.
	if got := DecodePayload(EncodePayload("a1-2", 10)); got != "a1-2" {
		t.Fatalf("decoded %q", got)
	}
	// The id does not share the record's memory: a long run keeps an id
	// per read, and a substring would keep every record alive (a 10-minute
	// run's history outgrew the machine's memory that way).
	rec := EncodePayload("a9-1", 4096)
	id := DecodePayload(rec)
	lo, hi := uintptr(unsafe.Pointer(unsafe.StringData(rec))), uintptr(unsafe.Pointer(unsafe.StringData(rec)))+uintptr(len(rec))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(id))); p >= lo && p < hi {
		t.Fatalf("DecodePayload's id points into the record")
	}
}

// retainedRun is cleanRun after retention: every node's log starts above
// offset 2 ("a" and "c" deleted), n3's above 3 too ("e" deleted there).
func retainedRun() ([]Op, []Read, []FinalLog) {
	ops, reads, finals := cleanRun()
	for i := range finals {
		finals[i].LogStart = 3
		finals[i].Entries = finals[i].Entries[2:]
	}
	finals[2].LogStart = 4
	finals[2].Entries = finals[2].Entries[1:]
	return ops, reads, finals
}

// Retention: entries below a node's log start may be missing there
// (acknowledged, read or not), and nothing else.
func TestCheckerAcceptsDeletionsBelowTheLogStart(t *testing.T) {
	ops, reads, finals := retainedRun()
	res := Check(ops, reads, finals)
	if !res.OK() {
		var b strings.Builder
		res.Print(&b, 10)
		t.Fatalf("a run with prefixes deleted by retention flagged:\n%s", b.String())
	}

	// Positive control: "f"@4, acked, at n3's log start, missing there.
	ops, reads, finals = retainedRun()
	finals[2].Entries = nil
	res = Check(ops, reads, finals)
	checkKinds(t, res, map[string]int{LostWrite: 1, UncommittedRead: 1, NotConverged: 1})
	for _, a := range res.Anomalies {
		if a.Kind == LostWrite && (a.Offset != 4 || !strings.Contains(a.Detail, "n3 has no data entry (log start 4")) {
			t.Errorf("lost write does not name offset 4 and n3's log start: %v", a)
		}
	}

	// Below every log start the readers still count: one saw another
	// record where "a" was acked, one skipped "a" without being reset.
	ops, _, finals = retainedRun()
	res = Check(ops, []Read{
		{Reader: 0, Node: "n1", Offset: 0, Payload: "b"},
		{Reader: 1, Node: "n2", Offset: 3, Payload: "e"},
	}, finals)
	checkKinds(t, res, map[string]int{LostWrite: 1, NonMonotonicRead: 1, UncommittedRead: 0})

	// Duplicates, phantoms and failed writes show in reads of entries
	// deleted everywhere since: "a" read again at 1, a phantom "zz" at 2,
	// the failed "d" at 1 by another reader.
	ops, _, finals = retainedRun()
	ops[3].Outcome = Failed
	res = Check(ops, []Read{
		{Reader: 0, Node: "n1", Offset: 0, Payload: "a"},
		{Reader: 0, Node: "n1", Offset: 1, Payload: "a"},
		{Reader: 0, Node: "n1", Offset: 2, Payload: "zz"},
		{Reader: 1, Node: "n2", Offset: 1, Payload: "d"},
	}, finals)
	checkKinds(t, res, map[string]int{Duplicate: 1, Phantom: 1, FailedPresent: 1})

	// Another entry above the log starts, on one node: not converged, and
	// the acked "e" replaced there.
	ops, reads, finals = retainedRun()
	finals[1].Entries[0] = LogEntry{3, 2, "b"}
	checkKinds(t, Check(ops, reads, finals), map[string]int{NotConverged: 1, LostWrite: 1, InconsistentOffset: 1})
}

// A reader sent below a node's log start may skip to that log start (a
// Reset read), never further, and only from where it stood.
func TestCheckerReaderResets(t *testing.T) {
	ops, _, finals := retainedRun()
	reset := func(from, to uint64) Read {
		return Read{Reader: 0, Session: 1, Node: "n2", Reset: true, From: from, Offset: to}
	}
	ok := []Read{
		{Reader: 0, Session: 0, Node: "n1", Offset: 0, Payload: "a"},
		reset(1, 3),
		{Reader: 0, Session: 1, Node: "n2", Offset: 3, Payload: "e"},
		{Reader: 0, Session: 1, Node: "n2", Offset: 4, Payload: "f"},
	}
	if res := Check(ops, ok, finals); !res.OK() {
		var b strings.Builder
		res.Print(&b, 10)
		t.Fatalf("a reset to the log start flagged:\n%s", b.String())
	}
	// Positive control: without the reset the reader skips "c"@2, which
	// the final logs of a run without retention hold: caught.
	_, _, full := cleanRun()
	checkKinds(t, Check(ops, []Read{ok[0], ok[2], ok[3]}, full), map[string]int{NonMonotonicRead: 1})

	tests := []struct {
		name  string
		reads []Read
		kind  string
	}{
		{"skip past the log start named", []Read{ok[0], reset(1, 3), ok[3]}, NonMonotonicRead},
		{"reset from another offset than the reader's", []Read{ok[0], reset(2, 3), ok[2]}, LogStartViolation},
		{"reset to a log start not above the offset asked for", []Read{ok[0], reset(1, 1)}, LogStartViolation},
		{"reset above every final HW", []Read{ok[0], reset(1, 9)}, LogStartViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			finals := finals
			if tt.kind == NonMonotonicRead {
				_, _, finals = cleanRun() // "e"@3 is held: a skip over it shows
				for i := range finals {
					finals[i].LogStart = 3
					finals[i].Entries = finals[i].Entries[2:]
				}
			}
			checkKinds(t, Check(ops, tt.reads, finals), map[string]int{tt.kind: 1})
		})
	}
}

func TestCheckStatusesLogStart(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	clean := []StatusSample{
		{Time: ms(0), Node: "n1", Incarnation: 1, Role: "leader", Epoch: 3, LEO: 9, HW: 9, LogStart: 4},
		// o1 reset to the leader's log start: above its HW until its next
		// fetch (R53), allowed for a non-leader.
		{Time: ms(0), Node: "o1", Incarnation: 1, Role: "observer", Epoch: 3, LEO: 4, HW: 0, LogStart: 4},
		// n1 restarted: its log start is durable.
		{Time: ms(100), Node: "n1", Incarnation: 2, Role: "follower", Epoch: 3, LEO: 9, HW: 5, LogStart: 4},
		// o1 wiped and restarted empty: epoch and log start start over.
		{Time: ms(200), Node: "o1", Incarnation: 2, Wipes: 1, Role: "observer", Epoch: 0, LEO: 0, HW: 0, LogStart: 0},
	}
	if as := CheckStatuses(clean); len(as) != 0 {
		t.Fatalf("clean statuses flagged: %v", as)
	}
	bad := append(append([]StatusSample(nil), clean...),
		StatusSample{Time: ms(300), Node: "n1", Incarnation: 3, Role: "follower", Epoch: 3, LEO: 9, HW: 5, LogStart: 2}, // down across a restart
		StatusSample{Time: ms(300), Node: "n2", Incarnation: 1, Role: "follower", Epoch: 3, LEO: 5, HW: 5, LogStart: 6}, // above its LEO
		StatusSample{Time: ms(300), Node: "n3", Incarnation: 1, Role: "leader", Epoch: 4, LEO: 9, HW: 5, LogStart: 6},   // a leader above its HW
	)
	var res Result
	res.Merge(CheckStatuses(bad))
	checkKinds(t, res, map[string]int{LogStartViolation: 3, EpochRegression: 0})
}
