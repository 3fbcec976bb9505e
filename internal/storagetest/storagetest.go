// Package storagetest holds the contract test suite every storage.Store
// implementation must pass, and a consistency checker for stores.
package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// Harness says how to get stores for the suite.
type Harness struct {
	// Open returns a fresh, empty store keeping its files (if any) in dir.
	Open func(t *testing.T, dir string) storage.Store
	// Reopen simulates a clean restart: it closes or abandons s (opened in
	// dir) and returns a store with its durable state.
	Reopen func(t *testing.T, s storage.Store, dir string) storage.Store
	// BigLog is the number of entries used by the large prefix-delete test
	// (0: 25000).
	BigLog int
	// Damage, if set, damages the stored entry at offset of the closed
	// store in dir so that its checksum fails, and returns the file it
	// damaged; the suite then reopens the store and expects the read of
	// that offset to fail with ErrCorrupt naming the file and the offset
	// (and the entries before it to read on). Stores without files leave
	// it nil.
	Damage func(t *testing.T, dir string, offset uint64) (file string)
}

// Run runs the contract suite. The suite closes the stores it opens, except
// those abandoned through Reopen.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Empty", testEmpty},
		{"AppendAndRead", testAppendAndRead},
		{"ReadLimits", testReadLimits},
		{"ReadLimitsEmptyEntries", testReadLimitsEmptyEntries},
		{"InvalidAppend", testInvalidAppend},
		{"TruncateSuffix", testTruncateSuffix},
		{"EndOffsetForEpoch", testEndOffsetForEpoch},
		{"QuorumState", testQuorumState},
		{"HWCheckpoint", testHWCheckpoint},
		{"DeletePrefix", testDeletePrefix},
		{"DeletePrefixAll", testDeletePrefixAll},
		{"DeletePrefixAboveLEO", testDeletePrefixAboveLEO},
		{"ResetKeepsTheLeadersEpoch", testResetKeepsTheLeadersEpoch},
		{"NewEpochAfterDeletePrefixAll", testNewEpochAfterDeletePrefixAll},
		{"DeletePrefixBig", testDeletePrefixBig},
		{"Reopen", testReopen},
		{"Copies", testCopies},
		{"ConcurrentAppends", testConcurrentAppends},
		{"Closed", testClosed},
		{"ApplyMixed", testApplyMixed},
		{"ApplyOrder", testApplyOrder},
		{"ApplyAtomic", testApplyAtomic},
		{"ApplyNoops", testApplyNoops},
		{"LongHistory", testLongHistory},
		{"VoterSets", testVoterSets},
		{"VoterSetsReset", testVoterSetsReset},
		{"VoterSetsResetRows", testVoterSetsResetRows},
		{"VoterSetsInvalid", testVoterSetsInvalid},
		{"VoterSetsCopies", testVoterSetsCopies},
		{"VoterSetsOwed", testVoterSetsOwed},
		{"KeyCheckpoint", testKeyCheckpoint},
	}
	if h.Damage != nil {
		tests = append(tests, struct {
			name string
			fn   func(t *testing.T, h Harness)
		}{"DamagedEntry", testDamagedEntry})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// Payload returns the deterministic payload the suite writes at offset in
// epoch, n bytes long.
func Payload(offset, epoch uint64, n int) []byte {
	p := make([]byte, n)
	x := offset*0x9E3779B97F4A7C15 ^ epoch*0xC2B2AE3D27D4EB4F
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// Batch returns count data entries starting at from in epoch, with payloads
// from Payload of size bytes.
func Batch(from uint64, count int, epoch uint64, size int) []protocol.Entry {
	es := make([]protocol.Entry, count)
	for i := range es {
		off := from + uint64(i)
		es[i] = protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryData, Data: Payload(off, epoch, size)}
	}
	return es
}

// Voters returns a deterministic voter set of 1 to 3 voters for k (IDs
// n1.., directory IDs naming k), for tests that write voters entries.
func Voters(k uint64) []protocol.Voter {
	vs := make([]protocol.Voter, 1+k%3)
	for i := range vs {
		vs[i] = protocol.Voter{ID: fmt.Sprintf("n%d", i+1), DirID: fmt.Sprintf("dir-%d-%d", k, i)}
	}
	return vs
}

// VotersEntry returns an EntryVoters entry at offset in epoch holding vs.
func VotersEntry(offset, epoch uint64, vs []protocol.Voter) protocol.Entry {
	return protocol.Entry{Offset: offset, Epoch: epoch, Type: protocol.EntryVoters, Data: protocol.EncodeVoters(vs)}
}

// CheckConsistent verifies s's invariants: every entry in [LogStart, LEO)
// reads back and carries the epoch the epoch map gives for its offset, the
// map is ordered, every row starts within [LogStart, LEO], and LastEpoch is
// the last row's epoch; the voter-set rows are in offset order, below the
// LEO, at most two below LogStart (with different sets), and those at or
// above it are exactly
// the log's EntryVoters entries with their sets (docs/protocol.md R55).
func CheckConsistent(s storage.Store) error {
	m := s.EpochMap()
	start, leo := s.LogStart(), s.LEO()
	rows := s.VoterSets()
	for i, r := range rows {
		if r.Offset >= leo || (i > 0 && r.Offset <= rows[i-1].Offset) {
			return fmt.Errorf("voter-set rows %v: out of order or at/above LEO %d", VoterSetsString(rows), leo)
		}
		if i > 1 && rows[i-2].Offset < start && r.Offset < start {
			return fmt.Errorf("voter-set rows %v: three below the log start %d", VoterSetsString(rows), start)
		}
		if i == 1 && r.Offset < start && slices.Equal(rows[0].Voters, r.Voters) {
			return fmt.Errorf("voter-set rows %v: two copies of a set below the log start %d", VoterSetsString(rows), start)
		}
	}
	for len(rows) > 0 && rows[0].Offset < start {
		rows = rows[1:]
	}
	for i, r := range m {
		if r.StartOffset < start || r.StartOffset > leo {
			return fmt.Errorf("epoch map row %v outside [%d, %d]", r, start, leo)
		}
		if i > 0 && (r.Epoch <= m[i-1].Epoch || r.StartOffset <= m[i-1].StartOffset) {
			return fmt.Errorf("epoch map rows %v and %v out of order", m[i-1], r)
		}
	}
	if want := lastEpoch(m); s.LastEpoch() != want {
		return fmt.Errorf("LastEpoch %d, epoch map says %d", s.LastEpoch(), want)
	}
	for off := start; off < leo; {
		es, err := s.Entries(off, 1000, 1<<20)
		if err != nil {
			return fmt.Errorf("Entries(%d): %w", off, err)
		}
		if len(es) == 0 {
			return fmt.Errorf("Entries(%d) returned nothing below LEO %d", off, leo)
		}
		for _, e := range es {
			if e.Offset != off {
				return fmt.Errorf("entry has offset %d, want %d", e.Offset, off)
			}
			if want := EpochAt(m, off); e.Epoch != want {
				return fmt.Errorf("entry at offset %d has epoch %d, epoch map says %d", off, e.Epoch, want)
			}
			if e.Type == protocol.EntryVoters {
				vs, owed, err := protocol.DecodeVoterSet(e.Data)
				if err != nil || len(rows) == 0 || rows[0].Offset != off || !slices.Equal(rows[0].Voters, vs) || !slices.Equal(rows[0].Owed, owed) {
					return fmt.Errorf("voters entry at offset %d (%v owing %v, %v): the next voter-set row is not its (rows %v)", off, vs, owed, err, VoterSetsString(rows))
				}
				rows = rows[1:]
			}
			off++
		}
	}
	if len(rows) > 0 {
		return fmt.Errorf("voter-set rows %v without a voters entry", VoterSetsString(rows))
	}
	return nil
}

// VoterSetsString renders voter-set rows compactly: "[3:n1/d,n2/d 7:n1/d]".
func VoterSetsString(rows []protocol.VotersAt) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		names := make([]string, len(r.Voters))
		for j, v := range r.Voters {
			names[j] = v.ID + "/" + v.DirID
		}
		parts[i] = fmt.Sprintf("%d:%s", r.Offset, strings.Join(names, ","))
		if len(r.Owed) > 0 {
			owed := make([]string, len(r.Owed))
			for j, v := range r.Owed {
				owed[j] = v.ID + "/" + v.DirID
			}
			parts[i] += " owes " + strings.Join(owed, ",")
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// EpochAt returns the epoch m gives for offset (0 if no row covers it).
func EpochAt(m []protocol.EpochStart, offset uint64) uint64 {
	e := uint64(0)
	for _, r := range m {
		if r.StartOffset > offset {
			break
		}
		e = r.Epoch
	}
	return e
}

func lastEpoch(m []protocol.EpochStart) uint64 {
	if len(m) == 0 {
		return 0
	}
	return m[len(m)-1].Epoch
}

// snapshot is everything observable about a store.
type snapshot struct {
	LogStart, LEO, LastEpoch uint64
	Epochs                   []protocol.EpochStart
	Voters                   string // VoterSetsString of VoterSets
	Entries                  []protocol.Entry
	Quorum                   protocol.QuorumState
	HW                       uint64
	HWOK                     bool
}

func snap(t *testing.T, s storage.Store) snapshot {
	t.Helper()
	sn, err := takeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

func takeSnapshot(s storage.Store) (snapshot, error) {
	sn := snapshot{LogStart: s.LogStart(), LEO: s.LEO(), LastEpoch: s.LastEpoch(), Epochs: s.EpochMap(), Voters: VoterSetsString(s.VoterSets())}
	for off := sn.LogStart; off < sn.LEO; {
		es, err := s.Entries(off, 0, 1<<30)
		if err != nil || len(es) == 0 {
			return sn, fmt.Errorf("Entries(%d) = %d entries, %v", off, len(es), err)
		}
		sn.Entries = append(sn.Entries, es...)
		off += uint64(len(es))
	}
	var err error
	if sn.Quorum, err = s.QuorumState(); err != nil {
		return sn, fmt.Errorf("QuorumState: %w", err)
	}
	if sn.HW, sn.HWOK, err = s.HWCheckpoint(); err != nil {
		return sn, fmt.Errorf("HWCheckpoint: %w", err)
	}
	return sn, nil
}

func (a snapshot) diff(b snapshot) string {
	switch {
	case a.LogStart != b.LogStart || a.LEO != b.LEO || a.LastEpoch != b.LastEpoch:
		return fmt.Sprintf("offsets (start %d, LEO %d, last epoch %d) != (%d, %d, %d)",
			a.LogStart, a.LEO, a.LastEpoch, b.LogStart, b.LEO, b.LastEpoch)
	case fmt.Sprint(a.Epochs) != fmt.Sprint(b.Epochs):
		return fmt.Sprintf("epoch map %v != %v", a.Epochs, b.Epochs)
	case a.Voters != b.Voters:
		return fmt.Sprintf("voter sets %s != %s", a.Voters, b.Voters)
	case a.Quorum != b.Quorum:
		return fmt.Sprintf("quorum %+v != %+v", a.Quorum, b.Quorum)
	case a.HW != b.HW || a.HWOK != b.HWOK:
		return fmt.Sprintf("HW (%d, %v) != (%d, %v)", a.HW, a.HWOK, b.HW, b.HWOK)
	case len(a.Entries) != len(b.Entries):
		return fmt.Sprintf("%d entries != %d", len(a.Entries), len(b.Entries))
	}
	for i := range a.Entries {
		x, y := a.Entries[i], b.Entries[i]
		if x.Offset != y.Offset || x.Epoch != y.Epoch || x.Type != y.Type || !bytes.Equal(x.Data, y.Data) {
			return fmt.Sprintf("entry %d: %+v != %+v", i, x, y)
		}
	}
	return ""
}

func open(t *testing.T, h Harness) (storage.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := h.Open(t, dir)
	return s, dir
}

func closeStore(t *testing.T, s storage.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// The suite writes through Apply only; these make one-write calls read
// like the operation they are.
func appendTo(s storage.Store, es []protocol.Entry) error {
	return s.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: es}})
}

func truncate(s storage.Store, from uint64) error {
	return s.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: from}})
}

func deletePrefix(s storage.Store, upTo uint64) error {
	return s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: upTo}})
}

func setQuorum(s storage.Store, q protocol.QuorumState) error {
	return s.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: q}})
}

func setHW(s storage.Store, hw uint64) error {
	return s.Apply([]protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: hw}})
}

func mustAppend(t *testing.T, s storage.Store, es []protocol.Entry) {
	t.Helper()
	if err := appendTo(s, es); err != nil {
		t.Fatalf("Append(%d entries at %d): %v", len(es), es[0].Offset, err)
	}
}

func mustConsistent(t *testing.T, s storage.Store) {
	t.Helper()
	if err := CheckConsistent(s); err != nil {
		t.Fatal(err)
	}
}

func expectErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// buildLog appends entries 0..len(epochs)-1, entry i in epochs[i], payload
// of 10 bytes.
func buildLog(t *testing.T, s storage.Store, epochs ...uint64) {
	t.Helper()
	for i, e := range epochs {
		mustAppend(t, s, Batch(uint64(i), 1, e, 10))
	}
}

func testEmpty(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	if s.LEO() != 0 || s.LogStart() != 0 || s.LastEpoch() != 0 || len(s.EpochMap()) != 0 {
		t.Fatalf("fresh store: LEO %d, start %d, last epoch %d, map %v", s.LEO(), s.LogStart(), s.LastEpoch(), s.EpochMap())
	}
	es, err := s.Entries(0, 10, 1000)
	if err != nil || len(es) != 0 {
		t.Fatalf("Entries(0) on empty = %v, %v", es, err)
	}
	_, err = s.Entries(1, 10, 1000)
	expectErr(t, "Entries(1) on empty", err, storage.ErrOutOfRange)
	for _, ep := range []uint64{0, 1, 7} {
		if e, end := s.EndOffsetForEpoch(ep); e != 0 || end != 0 {
			t.Fatalf("EndOffsetForEpoch(%d) on empty = (%d, %d), want (0, 0)", ep, e, end)
		}
	}
	if q, err := s.QuorumState(); err != nil || q != (protocol.QuorumState{}) {
		t.Fatalf("QuorumState on empty = %+v, %v", q, err)
	}
	if hw, ok, err := s.HWCheckpoint(); err != nil || ok || hw != 0 {
		t.Fatalf("HWCheckpoint on empty = %d, %v, %v", hw, ok, err)
	}
	if err := appendTo(s, nil); err != nil || s.LEO() != 0 {
		t.Fatalf("Append(nil) = %v, LEO %d", err, s.LEO())
	}
	if err := truncate(s, 0); err != nil {
		t.Fatalf("TruncateSuffix(0) on empty: %v", err)
	}
	if err := deletePrefix(s, 0); err != nil {
		t.Fatalf("DeletePrefix(0) on empty: %v", err)
	}
}

func testAppendAndRead(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	var want []protocol.Entry
	add := func(es []protocol.Entry) {
		mustAppend(t, s, es)
		want = append(want, es...)
	}
	add(Batch(0, 3, 1, 10))
	ctl := protocol.Entry{Offset: 3, Epoch: 2, Type: protocol.EntryControl}
	add([]protocol.Entry{ctl})
	add(Batch(4, 3, 2, 0)) // empty payloads are fine
	add(append(Batch(7, 2, 2, 5), Batch(9, 3, 5, 7)...))
	if s.LEO() != 12 || s.LastEpoch() != 5 {
		t.Fatalf("LEO %d, LastEpoch %d; want 12, 5", s.LEO(), s.LastEpoch())
	}
	wantMap := []protocol.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 3}, {Epoch: 5, StartOffset: 9}}
	if got := s.EpochMap(); fmt.Sprint(got) != fmt.Sprint(wantMap) {
		t.Fatalf("EpochMap = %v, want %v", got, wantMap)
	}
	for from := uint64(0); from <= 12; from++ {
		es, err := s.Entries(from, 0, 1<<20)
		if err != nil {
			t.Fatalf("Entries(%d): %v", from, err)
		}
		if len(es) != 12-int(from) {
			t.Fatalf("Entries(%d) returned %d entries, want %d", from, len(es), 12-from)
		}
		for i, e := range es {
			w := want[int(from)+i]
			if e.Offset != w.Offset || e.Epoch != w.Epoch || e.Type != w.Type || !bytes.Equal(e.Data, w.Data) {
				t.Fatalf("Entries(%d)[%d] = %+v, want %+v", from, i, e, w)
			}
		}
	}
	_, err := s.Entries(13, 10, 100)
	expectErr(t, "Entries(13) with LEO 12", err, storage.ErrOutOfRange)
	mustConsistent(t, s)
}

func testReadLimits(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	mustAppend(t, s, Batch(0, 1, 1, 100)) // a big first entry
	mustAppend(t, s, Batch(1, 9, 1, 10))
	const o = protocol.EntryOverhead
	cases := []struct {
		from               uint64
		maxCount, maxBytes int
		want               int
	}{
		{0, 0, 1 << 20, 10},
		{0, 3, 1 << 20, 3},
		{0, 1, 1 << 20, 1},
		{0, 10, 10, 1}, // the first entry is returned whole, above maxBytes
		{0, 10, 0, 1},  // even with no byte budget
		// Each entry costs len(Data) + EntryOverhead against maxBytes.
		{0, 10, 110 + 2*o, 2}, // 100 + 10
		{0, 10, 119 + 2*o, 2},
		{0, 10, 120 + 3*o, 3},
		{0, 10, 110 + o, 1}, // the overhead counts: 110 bytes of Data alone would fit
		{1, 10, 25 + 2*o, 2},
		{1, 10, 30 + 3*o, 3},
		{1, 2, 1000, 2},
		{5, 0, 1000, 5},
		{9, 5, 0, 1},
	}
	for _, c := range cases {
		es, err := s.Entries(c.from, c.maxCount, c.maxBytes)
		if err != nil {
			t.Fatalf("Entries(%d, %d, %d): %v", c.from, c.maxCount, c.maxBytes, err)
		}
		if len(es) != c.want {
			t.Fatalf("Entries(%d, %d, %d) returned %d entries, want %d", c.from, c.maxCount, c.maxBytes, len(es), c.want)
		}
		wantLen := 10
		if c.from == 0 {
			wantLen = 100
		}
		if es[0].Offset != c.from || len(es[0].Data) != wantLen {
			t.Fatalf("Entries(%d, ...)[0] = offset %d, %d bytes", c.from, es[0].Offset, len(es[0].Data))
		}
	}
}

func testInvalidAppend(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	mustAppend(t, s, Batch(0, 3, 2, 10))
	before := snap(t, s)
	data := func(off, epoch uint64) protocol.Entry {
		return protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryData, Data: []byte("x")}
	}
	bad := map[string][]protocol.Entry{
		"gap":                {data(4, 2)},
		"overlap":            {data(2, 2)},
		"not contiguous":     {data(3, 2), data(5, 2)},
		"epoch below last":   {data(3, 1)},
		"epoch going down":   {data(3, 3), data(4, 2)},
		"epoch zero":         {data(3, 0)},
		"type zero":          {{Offset: 3, Epoch: 2, Type: 0}},
		"unknown type":       {{Offset: 3, Epoch: 2, Type: 99}},
		"bad entry last":     {data(3, 2), data(4, 3), {Offset: 5, Epoch: 3, Type: 9}},
		"valid then gap":     {data(3, 4), data(4, 4), data(6, 4)},
		"duplicate in batch": {data(3, 2), data(3, 2)},
	}
	for name, es := range bad {
		err := appendTo(s, es)
		expectErr(t, "Append "+name, err, storage.ErrInvalidAppend)
		if d := snap(t, s).diff(before); d != "" {
			t.Fatalf("invalid append %q changed the store: %s", name, d)
		}
	}
	// The store still works.
	mustAppend(t, s, Batch(3, 2, 4, 10))
	mustConsistent(t, s)
}

func testTruncateSuffix(t *testing.T, h Harness) {
	s, dir := open(t, h)
	// epochs: 1 at 0..2, 3 at 3..5, 4 at 6..7, 7 at 8..9
	buildLog(t, s, 1, 1, 1, 3, 3, 3, 4, 4, 7, 7)
	if err := setHW(s, 9); err != nil {
		t.Fatal(err)
	}
	if err := truncate(s, 10); err != nil || s.LEO() != 10 {
		t.Fatalf("TruncateSuffix(LEO) = %v, LEO %d", err, s.LEO())
	}
	if err := truncate(s, 100); err != nil || s.LEO() != 10 {
		t.Fatalf("TruncateSuffix(100) = %v, LEO %d", err, s.LEO())
	}
	if err := truncate(s, 7); err != nil {
		t.Fatal(err)
	}
	if s.LEO() != 7 || s.LastEpoch() != 4 {
		t.Fatalf("after TruncateSuffix(7): LEO %d, LastEpoch %d; want 7, 4", s.LEO(), s.LastEpoch())
	}
	want := "[{1 0} {3 3} {4 6}]"
	if got := fmt.Sprint(s.EpochMap()); got != want {
		t.Fatalf("EpochMap after TruncateSuffix(7) = %s, want %s", got, want)
	}
	if hw, ok, _ := s.HWCheckpoint(); !ok || hw > 7 {
		t.Fatalf("HW checkpoint after truncation to 7 = %d, %v; want ≤ 7", hw, ok)
	}
	_, err := s.Entries(7, 10, 100)
	if err != nil {
		t.Fatalf("Entries(LEO) after truncation: %v", err)
	}
	_, err = s.Entries(8, 10, 100)
	expectErr(t, "Entries(8) after truncation to 7", err, storage.ErrOutOfRange)
	// Truncating at the exact start of an epoch removes its row.
	if err := truncate(s, 6); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.EpochMap()); got != "[{1 0} {3 3}]" {
		t.Fatalf("EpochMap after TruncateSuffix(6) = %s", got)
	}
	// A lower epoch than the one removed is fine again; a lower than the
	// last remaining is not.
	expectErr(t, "Append epoch 2 after epoch 3", appendTo(s, Batch(6, 1, 2, 10)), storage.ErrInvalidAppend)
	mustAppend(t, s, Batch(6, 2, 5, 10))
	if got := fmt.Sprint(s.EpochMap()); got != "[{1 0} {3 3} {5 6}]" {
		t.Fatalf("EpochMap after re-append = %s", got)
	}
	mustConsistent(t, s)
	s = h.Reopen(t, s, dir)
	defer closeStore(t, s)
	if got := fmt.Sprint(s.EpochMap()); got != "[{1 0} {3 3} {5 6}]" || s.LEO() != 8 {
		t.Fatalf("after reopen: EpochMap %s, LEO %d", got, s.LEO())
	}
	es, err := s.Entries(6, 10, 1000)
	if err != nil || len(es) != 2 || !bytes.Equal(es[0].Data, Payload(6, 5, 10)) {
		t.Fatalf("re-appended entries after reopen: %v, %v", es, err)
	}
	if err := truncate(s, 0); err != nil || s.LEO() != 0 || len(s.EpochMap()) != 0 || s.LastEpoch() != 0 {
		t.Fatalf("TruncateSuffix(0) = %v: LEO %d, map %v", err, s.LEO(), s.EpochMap())
	}
	mustConsistent(t, s)
}

func testEndOffsetForEpoch(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	// epochs: 2 at 0..3, 3 at 4..8, 6 at 9..11; LEO 12.
	buildLog(t, s, 2, 2, 2, 2, 3, 3, 3, 3, 3, 6, 6, 6)
	type want struct{ e, end uint64 }
	cases := []struct {
		asked uint64
		want  want
	}{
		{0, want{0, 0}},     // below the first epoch: (0, log start)
		{1, want{0, 0}},     // below the first epoch
		{2, want{2, 4}},     // present: up to the next epoch's start
		{3, want{3, 9}},     // present
		{4, want{3, 9}},     // absent between 3 and 6 (KIP-279): largest ≤ asked
		{5, want{3, 9}},     // absent between 3 and 6
		{6, want{6, 12}},    // last epoch: LEO
		{7, want{6, 12}},    // above the last: last epoch with LEO
		{1000, want{6, 12}}, // far above
	}
	for _, c := range cases {
		if e, end := s.EndOffsetForEpoch(c.asked); e != c.want.e || end != c.want.end {
			t.Errorf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", c.asked, e, end, c.want.e, c.want.end)
		}
	}
	// After a prefix delete, below the first epoch gives the log start.
	if err := deletePrefix(s, 5); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		asked uint64
		want  want
	}{{1, want{0, 5}}, {2, want{0, 5}}, {3, want{3, 9}}, {4, want{3, 9}}, {9, want{6, 12}}} {
		if e, end := s.EndOffsetForEpoch(c.asked); e != c.want.e || end != c.want.end {
			t.Errorf("after DeletePrefix(5): EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", c.asked, e, end, c.want.e, c.want.end)
		}
	}
}

func testQuorumState(t *testing.T, h Harness) {
	s, dir := open(t, h)
	states := []protocol.QuorumState{
		{Epoch: 1, VotedFor: "n1"},
		{Epoch: 1, VotedFor: "n1", LeaderID: "n1"},
		{Epoch: 7, LeaderID: "nœud-3 ☃"},
		{Epoch: 1 << 62, VotedFor: string(make([]byte, 300)), LeaderID: ""},
	}
	for _, q := range states {
		if err := setQuorum(s, q); err != nil {
			t.Fatal(err)
		}
		if got, err := s.QuorumState(); err != nil || got != q {
			t.Fatalf("QuorumState = %+v, %v; want %+v", got, err, q)
		}
	}
	q := protocol.QuorumState{Epoch: 9, VotedFor: "b", LeaderID: "c"}
	if err := setQuorum(s, q); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s, dir)
	defer closeStore(t, s)
	if got, err := s.QuorumState(); err != nil || got != q {
		t.Fatalf("QuorumState after reopen = %+v, %v; want %+v", got, err, q)
	}
}

func testHWCheckpoint(t *testing.T, h Harness) {
	s, dir := open(t, h)
	expectErr(t, "SetHWCheckpoint(1) on empty log", setHW(s, 1), storage.ErrOutOfRange)
	if err := setHW(s, 0); err != nil {
		t.Fatal(err)
	}
	buildLog(t, s, 1, 1, 1, 1, 1)
	expectErr(t, "SetHWCheckpoint(6) with LEO 5", setHW(s, 6), storage.ErrOutOfRange)
	if hw, ok, err := s.HWCheckpoint(); err != nil || !ok || hw != 0 {
		t.Fatalf("HWCheckpoint after refused set = %d, %v, %v; want 0, true", hw, ok, err)
	}
	for _, hw := range []uint64{3, 5, 4} { // it may move back: it is only a hint
		if err := setHW(s, hw); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.HWCheckpoint(); err != nil || !ok || got != hw {
			t.Fatalf("HWCheckpoint = %d, %v, %v; want %d", got, ok, err, hw)
		}
	}
	s = h.Reopen(t, s, dir)
	defer closeStore(t, s)
	if hw, ok, err := s.HWCheckpoint(); err != nil || !ok || hw != 4 {
		t.Fatalf("HWCheckpoint after reopen = %d, %v, %v; want 4, true", hw, ok, err)
	}
}

func testDeletePrefix(t *testing.T, h Harness) {
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, 30, 1, 10))
	mustAppend(t, s, Batch(30, 30, 2, 10))
	mustAppend(t, s, Batch(60, 40, 4, 10))
	if err := deletePrefix(s, 45); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if s.LogStart() != 45 || s.LEO() != 100 || s.LastEpoch() != 4 {
			t.Fatalf("%s: start %d, LEO %d, last epoch %d; want 45, 100, 4", when, s.LogStart(), s.LEO(), s.LastEpoch())
		}
		m := s.EpochMap()
		if len(m) != 2 || m[0].Epoch != 2 || m[0].StartOffset > 45 || m[1] != (protocol.EpochStart{Epoch: 4, StartOffset: 60}) {
			t.Fatalf("%s: epoch map %v, want the covering row of epoch 2 and (4, 60)", when, m)
		}
		for _, off := range []uint64{0, 29, 44} {
			_, err := s.Entries(off, 10, 100)
			expectErr(t, fmt.Sprintf("%s: Entries(%d) below log start", when, off), err, storage.ErrOutOfRange)
		}
		es, err := s.Entries(45, 0, 1<<20)
		if err != nil || len(es) != 55 || es[0].Offset != 45 || !bytes.Equal(es[0].Data, Payload(45, 2, 10)) {
			t.Fatalf("%s: Entries(45) = %d entries, %v", when, len(es), err)
		}
		if e, end := s.EndOffsetForEpoch(1); e != 0 || end != 45 {
			t.Fatalf("%s: EndOffsetForEpoch(1) = (%d, %d), want (0, 45)", when, e, end)
		}
		if e, end := s.EndOffsetForEpoch(3); e != 2 || end != 60 {
			t.Fatalf("%s: EndOffsetForEpoch(3) = (%d, %d), want (2, 60)", when, e, end)
		}
		mustConsistent(t, s)
	}
	check("after DeletePrefix(45)")
	if err := deletePrefix(s, 40); err != nil {
		t.Fatalf("DeletePrefix below log start: %v", err)
	}
	expectErr(t, "TruncateSuffix below log start", truncate(s, 44), storage.ErrOutOfRange)
	check("after no-ops")
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	check("after reopen")
	// Truncating to the log start empties the log; the map keeps the row
	// covering the entries below it (R52: the empty log compares in
	// elections as it did).
	if err := truncate(s, 45); err != nil {
		t.Fatal(err)
	}
	if s.LEO() != 45 || s.LogStart() != 45 || len(s.EpochMap()) != 1 || s.EpochMap()[0].StartOffset != 45 {
		t.Fatalf("after TruncateSuffix(log start): LEO %d, start %d, map %v", s.LEO(), s.LogStart(), s.EpochMap())
	}
	mustAppend(t, s, Batch(45, 5, 6, 10))
	if got := fmt.Sprint(s.EpochMap()); got != "[{6 45}]" {
		t.Fatalf("EpochMap = %s, want [{6 45}]", got)
	}
	mustConsistent(t, s)
}

func testDeletePrefixAll(t *testing.T, h Harness) {
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, 5, 1, 10))
	mustAppend(t, s, Batch(5, 5, 3, 10))
	if err := deletePrefix(s, 10); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if s.LogStart() != 10 || s.LEO() != 10 || s.LastEpoch() != 3 {
			t.Fatalf("%s: start %d, LEO %d, last epoch %d; want 10, 10, 3", when, s.LogStart(), s.LEO(), s.LastEpoch())
		}
		if e, end := s.EndOffsetForEpoch(3); e != 3 || end != 10 {
			t.Fatalf("%s: EndOffsetForEpoch(3) = (%d, %d), want (3, 10)", when, e, end)
		}
		if es, err := s.Entries(10, 10, 10); err != nil || len(es) != 0 {
			t.Fatalf("%s: Entries(LEO) = %v, %v", when, es, err)
		}
		_, err := s.Entries(9, 10, 10)
		expectErr(t, when+": Entries(9)", err, storage.ErrOutOfRange)
	}
	check("after DeletePrefix(LEO)")
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	check("after reopen")
	expectErr(t, "Append epoch 2 below last epoch 3", appendTo(s, Batch(10, 1, 2, 10)), storage.ErrInvalidAppend)
	mustAppend(t, s, Batch(10, 3, 3, 10))
	mustAppend(t, s, Batch(13, 3, 4, 10))
	if got := fmt.Sprint(s.EpochMap()); got != "[{3 10} {4 13}]" {
		t.Fatalf("EpochMap = %s", got)
	}
	mustConsistent(t, s)
}

// testNewEpochAfterDeletePrefixAll: after a prefix deletion up to the LEO
// the map keeps the last epoch's row at the LEO, covering no entry; an
// append of a new epoch there replaces that row (start offsets stay
// strictly increasing, so the store reopens), as Kafka's epoch cache does.
func testNewEpochAfterDeletePrefixAll(t *testing.T, h Harness) {
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, 5, 1, 10))
	mustAppend(t, s, Batch(5, 5, 3, 10))
	if err := deletePrefix(s, 10); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Batch(10, 3, 4, 10))
	if got := fmt.Sprint(s.EpochMap()); got != "[{4 10}]" {
		t.Fatalf("EpochMap = %s, want [{4 10}]", got)
	}
	if e, end := s.EndOffsetForEpoch(3); e != 0 || end != 10 {
		t.Fatalf("EndOffsetForEpoch(3) = (%d, %d), want (0, 10)", e, end)
	}
	mustConsistent(t, s)
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	if got := fmt.Sprint(s.EpochMap()); got != "[{4 10}]" {
		t.Fatalf("EpochMap after reopen = %s, want [{4 10}]", got)
	}
	mustConsistent(t, s)
}

// testDeletePrefixAboveLEO: a prefix deletion above the LEO empties the
// log and restarts it there, with no epoch row (a follower's reset to its
// leader's log start): the next entries may carry an epoch below the old
// last one, and everything survives a reopen.
func testDeletePrefixAboveLEO(t *testing.T, h Harness) {
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, 5, 1, 10))
	mustAppend(t, s, Batch(5, 5, 4, 10))
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := deletePrefix(s, 50); err != nil {
		t.Fatalf("DeletePrefix(50) with LEO 10: %v", err)
	}
	check := func(when string) {
		t.Helper()
		if s.LogStart() != 50 || s.LEO() != 50 || s.LastEpoch() != 0 || len(s.EpochMap()) != 0 {
			t.Fatalf("%s: start %d, LEO %d, last epoch %d, map %v; want 50, 50, 0, empty", when, s.LogStart(), s.LEO(), s.LastEpoch(), s.EpochMap())
		}
		if e, end := s.EndOffsetForEpoch(9); e != 0 || end != 50 {
			t.Fatalf("%s: EndOffsetForEpoch(9) = (%d, %d), want (0, 50)", when, e, end)
		}
		if es, err := s.Entries(50, 10, 100); err != nil || len(es) != 0 {
			t.Fatalf("%s: Entries(LEO) = %v, %v", when, es, err)
		}
		for _, off := range []uint64{0, 9, 10, 49} {
			_, err := s.Entries(off, 10, 100)
			expectErr(t, fmt.Sprintf("%s: Entries(%d)", when, off), err, storage.ErrOutOfRange)
		}
		if hw, ok, err := s.HWCheckpoint(); err != nil || !ok || hw != 3 {
			t.Fatalf("%s: HW checkpoint %d, %v, %v; want 3 left as it was", when, hw, ok, err)
		}
	}
	check("after DeletePrefix(50)")
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	check("after reopen")
	mustAppend(t, s, Batch(50, 3, 2, 10)) // epoch 2 < the old last epoch 4
	if got := fmt.Sprint(s.EpochMap()); got != "[{2 50}]" {
		t.Fatalf("EpochMap = %s", got)
	}
	es, err := s.Entries(50, 10, 1000)
	if err != nil || len(es) != 3 || es[0].Offset != 50 || es[0].Epoch != 2 {
		t.Fatalf("Entries(50) = %v, %v", es, err)
	}
	mustConsistent(t, s)
}

// testResetKeepsTheLeadersEpoch: a follower's reset to its leader's log
// start (a truncation to it, then a prefix deletion with Write.Epoch, the
// epoch of the leader's entry below it) leaves the one epoch row {Epoch,
// start}, across a reopen; a truncation to a non-zero log start keeps the
// first row (it covers the entries below it, or, replaced by the epoch of
// entries appended at the start and truncated since, an epoch whose leader
// held everything committed below it), and a deletion above the LEO with
// an Epoch leaves that row (R21, R53).
func testResetKeepsTheLeadersEpoch(t *testing.T, h Harness) {
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, 5, 1, 10))
	mustAppend(t, s, Batch(5, 5, 4, 10)) // of an epoch the leader does not have
	if err := s.Apply([]protocol.Write{
		{Kind: protocol.WriteTruncate, Offset: 5},
		{Kind: protocol.WriteDeletePrefix, Offset: 5, Epoch: 2},
	}); err != nil {
		t.Fatalf("reset to 5: %v", err)
	}
	check := func(when, want string) {
		t.Helper()
		if s.LogStart() != 5 || s.LEO() != 5 || fmt.Sprint(s.EpochMap()) != want {
			t.Fatalf("%s: start %d, LEO %d, map %v; want 5, 5, %s", when, s.LogStart(), s.LEO(), s.EpochMap(), want)
		}
	}
	check("after the reset", "[{2 5}]")
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	check("after reopen", "[{2 5}]")
	if e, end := s.EndOffsetForEpoch(2); e != 2 || end != 5 {
		t.Fatalf("EndOffsetForEpoch(2) = (%d, %d), want (2, 5)", e, end)
	}
	// The first entries' epoch replaces the row that covers none (start
	// offsets stay strictly increasing); a truncation back to the log start
	// keeps the first row.
	mustAppend(t, s, Batch(5, 3, 3, 10))
	if got := fmt.Sprint(s.EpochMap()); got != "[{3 5}]" {
		t.Fatalf("after appending epoch 3 at 5: map %s", got)
	}
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	check("after truncating to the log start", "[{3 5}]")
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: 50, Epoch: 3}}); err != nil {
		t.Fatal(err)
	}
	if s.LogStart() != 50 || s.LEO() != 50 || fmt.Sprint(s.EpochMap()) != "[{3 50}]" {
		t.Fatalf("reset to 50 above the LEO: start %d, LEO %d, map %v; want 50, 50, [{3 50}]", s.LogStart(), s.LEO(), s.EpochMap())
	}
	mustConsistent(t, s)
}

func testDeletePrefixBig(t *testing.T, h Harness) {
	n := h.BigLog
	if n == 0 {
		n = 25000
	}
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, n/2, 1, 8))
	mustAppend(t, s, Batch(uint64(n/2), n-n/2, 2, 8))
	upTo := uint64(n - 10)
	if err := deletePrefix(s, upTo); err != nil {
		t.Fatal(err)
	}
	// Writes keep working while the deleted entries are cleaned up.
	mustAppend(t, s, Batch(uint64(n), 10, 2, 8))
	if err := deletePrefix(s, upTo+5); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s, dir)
	defer closeStore(t, s)
	if s.LogStart() != upTo+5 || s.LEO() != uint64(n+10) {
		t.Fatalf("start %d, LEO %d; want %d, %d", s.LogStart(), s.LEO(), upTo+5, n+10)
	}
	if got := fmt.Sprint(s.EpochMap()); got != fmt.Sprintf("[{2 %d}]", upTo+5) {
		t.Fatalf("EpochMap = %s", got)
	}
	mustConsistent(t, s)
}

func testReopen(t *testing.T, h Harness) {
	s, dir := open(t, h)
	mustAppend(t, s, Batch(0, 20, 1, 33))
	mustAppend(t, s, []protocol.Entry{{Offset: 20, Epoch: 2, Type: protocol.EntryControl}})
	mustAppend(t, s, Batch(21, 20, 2, 1000))
	if err := truncate(s, 35); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Batch(35, 10, 5, 7))
	if err := deletePrefix(s, 3); err != nil {
		t.Fatal(err)
	}
	if err := setQuorum(s, protocol.QuorumState{Epoch: 5, VotedFor: "a", LeaderID: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := setHW(s, 30); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	s = h.Reopen(t, s, dir)
	if d := snap(t, s).diff(before); d != "" {
		t.Fatalf("state changed across reopen: %s", d)
	}
	mustConsistent(t, s)
	mustAppend(t, s, Batch(45, 5, 6, 7))
	before = snap(t, s)
	s = h.Reopen(t, s, dir)
	defer closeStore(t, s)
	if d := snap(t, s).diff(before); d != "" {
		t.Fatalf("state changed across second reopen: %s", d)
	}
}

func testCopies(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	in := Batch(0, 3, 1, 10)
	mustAppend(t, s, in)
	for i := range in { // the store must not keep the caller's slices
		for j := range in[i].Data {
			in[i].Data[j] ^= 0xff
		}
	}
	es, err := s.Entries(0, 0, 1000)
	if err != nil || len(es) != 3 {
		t.Fatalf("Entries = %d, %v", len(es), err)
	}
	for i, e := range es {
		if !bytes.Equal(e.Data, Payload(uint64(i), 1, 10)) {
			t.Fatalf("entry %d changed with the caller's slice after Append", i)
		}
	}
	// Growing one returned Data must not overwrite the next one's.
	_ = append(es[0].Data, 1, 2, 3, 4, 5)
	for i := range es {
		es[i].Data[0] ^= 0xff
		es[i].Epoch = 99
	}
	es2, _ := s.Entries(0, 0, 1000)
	for i, e := range es2 {
		if !bytes.Equal(e.Data, Payload(uint64(i), 1, 10)) || e.Epoch != 1 {
			t.Fatalf("entry %d changed after mutating a returned slice", i)
		}
	}
	m := s.EpochMap()
	m[0].Epoch = 42
	if s.EpochMap()[0].Epoch != 1 {
		t.Fatal("EpochMap changed after mutating a returned slice")
	}
}

func testConcurrentAppends(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	const writers, each = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	stop := make(chan struct{})
	// Readers run alongside (for the race detector and read-during-commit).
	var rwg sync.WaitGroup
	for r := 0; r < 2; r++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				leo := s.LEO()
				if leo == 0 {
					continue
				}
				if _, err := s.Entries(leo-1, 10, 1000); err != nil {
					errs <- fmt.Errorf("reader: Entries(%d): %w", leo-1, err)
					return
				}
				_, _ = s.EndOffsetForEpoch(1)
			}
		}()
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				data := []byte(fmt.Sprintf("w%d-%d", w, i))
				for {
					// Optimistic: whoever loses the race for the LEO retries.
					leo := s.LEO()
					err := appendTo(s, []protocol.Entry{{Offset: leo, Epoch: 1, Type: protocol.EntryData, Data: data}})
					if err == nil {
						break
					}
					if !errors.Is(err, storage.ErrInvalidAppend) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s.LEO() != writers*each {
		t.Fatalf("LEO %d, want %d", s.LEO(), writers*each)
	}
	es, err := s.Entries(0, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[string(e.Data)] {
			t.Fatalf("payload %q stored twice", e.Data)
		}
		seen[string(e.Data)] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct payloads, want %d", len(seen), writers*each)
	}
	mustConsistent(t, s)
}

func testClosed(t *testing.T, h Harness) {
	s, _ := open(t, h)
	mustAppend(t, s, Batch(0, 2, 1, 10))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	expectErr(t, "Apply(nil) after Close", s.Apply(nil), storage.ErrClosed)
	expectErr(t, "Append after Close", appendTo(s, Batch(2, 1, 1, 1)), storage.ErrClosed)
	expectErr(t, "TruncateSuffix after Close", truncate(s, 1), storage.ErrClosed)
	expectErr(t, "DeletePrefix after Close", deletePrefix(s, 1), storage.ErrClosed)
	expectErr(t, "SetQuorumState after Close", setQuorum(s, protocol.QuorumState{Epoch: 1}), storage.ErrClosed)
	expectErr(t, "SetHWCheckpoint after Close", setHW(s, 1), storage.ErrClosed)
	_, err := s.Entries(0, 1, 1)
	expectErr(t, "Entries after Close", err, storage.ErrClosed)
	_, err = s.QuorumState()
	expectErr(t, "QuorumState after Close", err, storage.ErrClosed)
	_, _, err = s.HWCheckpoint()
	expectErr(t, "HWCheckpoint after Close", err, storage.ErrClosed)
	expectErr(t, "second Close", s.Close(), storage.ErrClosed)
}

// Compare returns nil if a and b hold the same observable state (offsets,
// epoch map, voter-set rows, every entry, quorum state, HW checkpoint), or
// an error saying
// where they differ first.
func Compare(a, b storage.Store) error {
	sa, err := takeSnapshot(a)
	if err != nil {
		return fmt.Errorf("first store: %w", err)
	}
	sb, err := takeSnapshot(b)
	if err != nil {
		return fmt.Errorf("second store: %w", err)
	}
	if d := sa.diff(sb); d != "" {
		return errors.New(d)
	}
	return nil
}

// Empty entries still cost EntryOverhead each, so a byte budget bounds how
// many come back (a fetch of a million empty records must not be unbounded).
func testReadLimitsEmptyEntries(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	mustAppend(t, s, Batch(0, 100, 1, 0))
	es, err := s.Entries(0, 0, 10*protocol.EntryOverhead)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 10 {
		t.Fatalf("Entries of empty records with a budget of 10 overheads returned %d, want 10", len(es))
	}
}

// A batch of mixed writes (the quorum state, entries of two epochs, the HW
// checkpoint) is applied in order, visible at once and durable as a whole.
func testApplyMixed(t *testing.T, h Harness) {
	s, dir := open(t, h)
	q := protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}
	ws := []protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: q},
		{Kind: protocol.WriteAppend, Entries: Batch(0, 3, 1, 10)},
		{Kind: protocol.WriteAppend, Entries: Batch(3, 2, 2, 10)},
		{Kind: protocol.WriteHWCheckpoint, Offset: 5}, // valid only after the appends
	}
	if err := s.Apply(ws); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if s.LEO() != 5 || fmt.Sprint(s.EpochMap()) != "[{1 0} {2 3}]" {
			t.Fatalf("%s: LEO %d, map %v", when, s.LEO(), s.EpochMap())
		}
		if got, err := s.QuorumState(); err != nil || got != q {
			t.Fatalf("%s: QuorumState = %+v, %v", when, got, err)
		}
		if hw, ok, err := s.HWCheckpoint(); err != nil || !ok || hw != 5 {
			t.Fatalf("%s: HWCheckpoint = %d, %v, %v", when, hw, ok, err)
		}
		es, err := s.Entries(0, 0, 1<<20)
		if err != nil || len(es) != 5 || !bytes.Equal(es[4].Data, Payload(4, 2, 10)) {
			t.Fatalf("%s: Entries = %d, %v", when, len(es), err)
		}
		mustConsistent(t, s)
	}
	check("after Apply")
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	check("after reopen")
}

// Order inside a batch matters: each write is validated against the state
// the writes before it leave.
func testApplyOrder(t *testing.T, h Harness) {
	s, dir := open(t, h)
	buildLog(t, s, 1, 1, 1, 1, 1)
	before := snap(t, s)
	// An append at the truncation point is valid only after the truncation.
	replace := Batch(3, 2, 2, 10)
	bad := []protocol.Write{
		{Kind: protocol.WriteAppend, Entries: replace},
		{Kind: protocol.WriteTruncate, Offset: 3},
	}
	expectErr(t, "append then truncate", s.Apply(bad), storage.ErrInvalidAppend)
	if d := snap(t, s).diff(before); d != "" {
		t.Fatalf("refused batch changed the store: %s", d)
	}
	// An HW checkpoint is valid only after the appends that reach it.
	more := Batch(5, 2, 2, 10)
	expectErr(t, "checkpoint before the appends", s.Apply([]protocol.Write{
		{Kind: protocol.WriteHWCheckpoint, Offset: 7},
		{Kind: protocol.WriteAppend, Entries: more},
	}), storage.ErrOutOfRange)
	if d := snap(t, s).diff(before); d != "" {
		t.Fatalf("refused batch changed the store: %s", d)
	}
	err := s.Apply([]protocol.Write{
		{Kind: protocol.WriteTruncate, Offset: 3},
		{Kind: protocol.WriteAppend, Entries: replace},
		{Kind: protocol.WriteAppend, Entries: more},
		{Kind: protocol.WriteHWCheckpoint, Offset: 7},
	})
	if err != nil {
		t.Fatalf("truncate, append, checkpoint: %v", err)
	}
	check := func(when string) {
		t.Helper()
		if s.LEO() != 7 || fmt.Sprint(s.EpochMap()) != "[{1 0} {2 3}]" {
			t.Fatalf("%s: LEO %d, map %v", when, s.LEO(), s.EpochMap())
		}
		es, err := s.Entries(2, 0, 1<<20)
		if err != nil || len(es) != 5 || es[0].Epoch != 1 || es[1].Epoch != 2 || !bytes.Equal(es[1].Data, Payload(3, 2, 10)) {
			t.Fatalf("%s: Entries(2) = %+v, %v", when, es, err)
		}
		if hw, ok, _ := s.HWCheckpoint(); !ok || hw != 7 {
			t.Fatalf("%s: HW checkpoint %d, %v; want 7", when, hw, ok)
		}
		mustConsistent(t, s)
	}
	check("after Apply")
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	check("after reopen")
}

// A batch whose third write is invalid leaves the store as it was, even
// when the writes before it truncated and overwrote entries, and across a
// restart; the first two writes alone then apply (positive control).
func testApplyAtomic(t *testing.T, h Harness) {
	s, dir := open(t, h)
	buildLog(t, s, 1, 1, 1, 1, 1, 1)
	if err := deletePrefix(s, 1); err != nil {
		t.Fatal(err)
	}
	if err := setHW(s, 4); err != nil {
		t.Fatal(err)
	}
	if err := setQuorum(s, protocol.QuorumState{Epoch: 1, LeaderID: "a"}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s)
	first := []protocol.Write{
		{Kind: protocol.WriteTruncate, Offset: 2},                 // LEO 2, HW 2
		{Kind: protocol.WriteAppend, Entries: Batch(2, 3, 3, 10)}, // LEO 5, epoch 3 from 2
	}
	data := func(off, epoch uint64) protocol.Entry {
		return protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryData, Data: []byte("x")}
	}
	bad := []struct {
		name string
		w    protocol.Write
		want error
	}{
		{"append gap", protocol.Write{Kind: protocol.WriteAppend, Entries: []protocol.Entry{data(6, 3)}}, storage.ErrInvalidAppend},
		{"append epoch down", protocol.Write{Kind: protocol.WriteAppend, Entries: []protocol.Entry{data(5, 2)}}, storage.ErrInvalidAppend},
		{"append epoch zero", protocol.Write{Kind: protocol.WriteAppend, Entries: []protocol.Entry{data(5, 0)}}, storage.ErrInvalidAppend},
		{"HW above LEO", protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: 6}, storage.ErrOutOfRange},
		{"truncate below log start", protocol.Write{Kind: protocol.WriteTruncate, Offset: 0}, storage.ErrOutOfRange},
		{"unknown kind", protocol.Write{Kind: 0}, storage.ErrInvalidWrite},
	}
	for _, c := range bad {
		ws := append(append([]protocol.Write(nil), first...), c.w)
		expectErr(t, c.name, s.Apply(ws), c.want)
		if d := snap(t, s).diff(before); d != "" {
			t.Fatalf("batch with invalid write %q was partly applied: %s", c.name, d)
		}
	}
	s = h.Reopen(t, s, dir)
	defer func() { closeStore(t, s) }()
	if d := snap(t, s).diff(before); d != "" {
		t.Fatalf("after reopen, refused batches show: %s", d)
	}
	if err := s.Apply(first); err != nil {
		t.Fatalf("the valid writes alone: %v", err)
	}
	if s.LEO() != 5 || fmt.Sprint(s.EpochMap()) != "[{1 1} {3 2}]" {
		t.Fatalf("after the valid writes: LEO %d, map %v", s.LEO(), s.EpochMap())
	}
	if hw, _, _ := s.HWCheckpoint(); hw != 2 {
		t.Fatalf("HW checkpoint %d after truncation to 2, want 2", hw)
	}
	mustConsistent(t, s)
}

// No writes, or only no-ops, change nothing and succeed.
func testApplyNoops(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	buildLog(t, s, 1, 1, 1)
	before := snap(t, s)
	for _, ws := range [][]protocol.Write{
		nil,
		{},
		{{Kind: protocol.WriteAppend}, {Kind: protocol.WriteTruncate, Offset: 3}, {Kind: protocol.WriteDeletePrefix, Offset: 0}},
	} {
		if err := s.Apply(ws); err != nil {
			t.Fatalf("Apply(%v): %v", ws, err)
		}
		if d := snap(t, s).diff(before); d != "" {
			t.Fatalf("Apply(%v) changed the store: %s", ws, d)
		}
	}
}

// testLongHistory runs a long mixed history — appends of every size, new
// epochs, truncations (some deep), prefix deletions (some to the LEO and
// above it), votes and HW checkpoints — against a Memory model, with
// reopens along the way; after every step the store equals the model and
// reads from random offsets with random limits return what the model
// returns. On a store of segment files with a small segment size this is
// rolls, truncations into sealed segments and deletions of whole
// segments, over and over.
func testLongHistory(t *testing.T, h Harness) {
	s, dir := open(t, h)
	defer func() { closeStore(t, s) }()
	model := storage.NewMemory()
	rng := rand.New(rand.NewPCG(11, 12))
	epoch := uint64(1)
	apply := func(ws ...protocol.Write) {
		t.Helper()
		errS, errM := s.Apply(ws), model.Apply(ws)
		if (errS == nil) != (errM == nil) {
			t.Fatalf("Apply(%v): store %v, model %v", ws, errS, errM)
		}
	}
	for step := range 300 {
		leo, start := s.LEO(), s.LogStart()
		switch r := rng.IntN(100); {
		case r < 5 && leo > start:
			epoch++
			apply(protocol.Write{Kind: protocol.WriteTruncate, Offset: leo - rng.Uint64N(min(leo-start, 400)+1)},
				protocol.Write{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: epoch, LeaderID: "x"}})
		case r < 9:
			up := start + rng.Uint64N(leo-start+1)
			if rng.IntN(4) == 0 {
				up = leo + rng.Uint64N(3) // to the LEO, or a reset above it
			}
			apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: up})
		case r < 12:
			apply(protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: start + rng.Uint64N(leo-start+1)})
		case r < 15:
			epoch++
			apply(protocol.Write{Kind: protocol.WriteAppend, Entries: Batch(leo, 1+rng.IntN(5), epoch, 20)})
		case r < 22:
			// A voters entry somewhere in a batch (R55's rows).
			es := Batch(leo, 1+rng.IntN(20), epoch, rng.IntN(300))
			i := rng.IntN(len(es))
			es[i] = VotersEntry(es[i].Offset, epoch, Voters(uint64(step)))
			apply(protocol.Write{Kind: protocol.WriteAppend, Entries: es})
		default:
			apply(protocol.Write{Kind: protocol.WriteAppend, Entries: Batch(leo, 1+rng.IntN(60), epoch, rng.IntN(300))})
		}
		if step%50 == 49 {
			s = h.Reopen(t, s, dir)
			mustConsistent(t, s)
		}
		if err := Compare(s, model); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if start, leo := s.LogStart(), s.LEO(); leo > start {
			from := start + rng.Uint64N(leo-start)
			n, b := rng.IntN(50), rng.IntN(5000)
			got, err := s.Entries(from, n, b)
			want, werr := model.Entries(from, n, b)
			if err != nil || werr != nil || len(got) != len(want) {
				t.Fatalf("step %d: Entries(%d, %d, %d) = %d entries, %v; model %d, %v", step, from, n, b, len(got), err, len(want), werr)
			}
			for i := range got {
				if got[i].Offset != want[i].Offset || got[i].Epoch != want[i].Epoch || !bytes.Equal(got[i].Data, want[i].Data) {
					t.Fatalf("step %d: Entries(%d)[%d] = %+v, model %+v", step, from, i, got[i], want[i])
				}
			}
		}
	}
	mustConsistent(t, s)
}

// testDamagedEntry: an entry whose stored bytes were damaged fails its
// read with ErrCorrupt naming the store's file and the offset, after a
// reopen; the entries before it read on.
func testDamagedEntry(t *testing.T, h Harness) {
	s, dir := open(t, h)
	for i := range 20 {
		mustAppend(t, s, Batch(uint64(30*i), 30, 1, 100))
	}
	s = h.Reopen(t, s, dir) // a clean reopen writes everything out
	closeStore(t, s)
	const off = 437
	file := h.Damage(t, dir, off)
	s = h.Reopen(t, openClosed{}, dir)
	defer closeStore(t, s)
	_, err := s.Entries(400, 0, 1<<20)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
		t.Fatalf("Entries(400) over the damaged entry %d: %v; want ErrCorrupt naming %s and the offset", off, err, file)
	}
	if es, err := s.Entries(400, off-400, 1<<20); err != nil || len(es) != off-400 {
		t.Fatalf("Entries(400) up to the damaged entry: %d entries, %v", len(es), err)
	}
}

// openClosed is what testDamagedEntry hands Reopen for a store it closed
// itself: closing it again does nothing.
type openClosed struct{ storage.Store }

func (openClosed) Close() error { return nil }

// wantVoters fails t unless s's voter-set rows are want, given as
// (offset, Voters key) pairs.
func wantVoters(t *testing.T, s storage.Store, when string, want ...uint64) {
	t.Helper()
	var rows []protocol.VotersAt
	for i := 0; i+1 < len(want); i += 2 {
		rows = append(rows, protocol.VotersAt{Offset: want[i], Voters: Voters(want[i+1])})
	}
	if got, w := VoterSetsString(s.VoterSets()), VoterSetsString(rows); got != w {
		t.Fatalf("%s: voter sets %s, want %s", when, got, w)
	}
	mustConsistent(t, s)
}

// testVoterSets: each voters entry adds a row (R55); a truncation below
// one drops its row (the set before it is back in force); a prefix
// deletion drops the rows below the new log start except the newest of
// them, the set in force at the log start, and the newest before it with
// another set (the newest change), which stay through later deletions
// until newer rows are below the start too; copies of the set in force
// are no change; every state survives a reopen.
func testVoterSets(t *testing.T, h Harness) {
	s, dir := open(t, h)
	defer func() { closeStore(t, s) }()
	wantVoters(t, s, "empty store")
	// 0..2 data, 3 voters (1), 4..5 data, 6 voters (2) in epoch 2, 7
	// data, 8 voters (3), 9 data: LEO 10; several rows in one append.
	es := Batch(0, 10, 1, 10)
	es[3] = VotersEntry(3, 1, Voters(1))
	for i := 6; i < 10; i++ {
		es[i].Epoch = 2
	}
	es[6] = VotersEntry(6, 2, Voters(2))
	es[8] = VotersEntry(8, 2, Voters(3))
	mustAppend(t, s, es[:5])
	mustAppend(t, s, es[5:])
	wantVoters(t, s, "after the appends", 3, 1, 6, 2, 8, 3)
	// Back below the voters entry at 8: its row goes.
	if err := truncate(s, 8); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after TruncateSuffix(8)", 3, 1, 6, 2)
	if err := truncate(s, 7); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after TruncateSuffix(7)", 3, 1, 6, 2)
	// A new set at 7, then truncated away with the one at 6 and replaced.
	mustAppend(t, s, []protocol.Entry{VotersEntry(7, 3, Voters(4))})
	wantVoters(t, s, "after a voters entry at 7", 3, 1, 6, 2, 7, 4)
	if err := truncate(s, 6); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after TruncateSuffix(6)", 3, 1)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after reopen", 3, 1)
	// 6 voters (5), 7..12 data, 13 voters (6), 14..15 data, 16 voters
	// (7), 17 data: LEO 18.
	es = Batch(6, 12, 4, 10)
	es[0] = VotersEntry(6, 4, Voters(5))
	es[7] = VotersEntry(13, 4, Voters(6))
	es[10] = VotersEntry(16, 4, Voters(7))
	mustAppend(t, s, es)
	wantVoters(t, s, "after the second appends", 3, 1, 6, 5, 13, 6, 16, 7)
	// One row below the start: it stays.
	if err := deletePrefix(s, 5); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after DeletePrefix(5)", 3, 1, 6, 5, 13, 6, 16, 7)
	// Past the rows at 3, 6 and 13: 13's stays, the set in force at 14,
	// and 6's, the change before it.
	if err := deletePrefix(s, 14); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after DeletePrefix(14)", 6, 5, 13, 6, 16, 7)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after reopen at log start 14", 6, 5, 13, 6, 16, 7)
	// Up to the voters entry at 16: it is in the log, 13's is in force
	// below it.
	if err := deletePrefix(s, 16); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after DeletePrefix(16)", 6, 5, 13, 6, 16, 7)
	if err := deletePrefix(s, 17); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after DeletePrefix(17)", 13, 6, 16, 7)
	// A truncation to the log start leaves the rows below it.
	if err := truncate(s, 17); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after TruncateSuffix(log start 17)", 13, 6, 16, 7)
	// Up to the LEO: the log is empty, the set in force stays.
	mustAppend(t, s, []protocol.Entry{VotersEntry(17, 5, Voters(8)), Batch(18, 1, 5, 10)[0]})
	if err := deletePrefix(s, 19); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after DeletePrefix(LEO 19)", 16, 7, 17, 8)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after the last reopen", 16, 7, 17, 8)
	if s.LogStart() != 19 || s.LEO() != 19 {
		t.Fatalf("log [%d, %d), want [19, 19)", s.LogStart(), s.LEO())
	}
	// A copy of the set in force (retention's re-append above the log
	// start) is no change: once the log start passes it, the change kept
	// is still 16's, not the copy's original at 17.
	mustAppend(t, s, []protocol.Entry{VotersEntry(19, 5, Voters(8)), Batch(20, 1, 5, 10)[0]})
	if err := deletePrefix(s, 21); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after DeletePrefix(21) past a copy", 16, 7, 19, 8)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after reopen past a copy", 16, 7, 19, 8)
}

// testVoterSetsReset: a prefix deletion above the LEO (a follower's reset
// to its leader's log start) empties the log and the epoch map but keeps
// the newest voter-set row and the change before it (R55: the set in
// force is never forgotten); later voters entries add rows above them,
// and they survive a reopen.
func testVoterSetsReset(t *testing.T, h Harness) {
	s, dir := open(t, h)
	defer func() { closeStore(t, s) }()
	es := Batch(0, 6, 2, 10)
	es[2] = VotersEntry(2, 2, Voters(1))
	es[4] = VotersEntry(4, 2, Voters(2))
	mustAppend(t, s, es)
	if err := deletePrefix(s, 50); err != nil {
		t.Fatal(err)
	}
	if len(s.EpochMap()) != 0 {
		t.Fatalf("epoch map %v after a reset, want empty", s.EpochMap())
	}
	wantVoters(t, s, "after DeletePrefix(50) with LEO 6", 2, 1, 4, 2)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after reopen", 2, 1, 4, 2)
	mustAppend(t, s, []protocol.Entry{VotersEntry(50, 1, Voters(3)), Batch(51, 1, 1, 10)[0]})
	wantVoters(t, s, "after a voters entry at 50", 2, 1, 4, 2, 50, 3)
	if err := deletePrefix(s, 60); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after a second reset", 4, 2, 50, 3)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after the second reopen", 4, 2, 50, 3)
}

// testVoterSetsResetRows: a prefix deletion that carries voter-set rows
// (a follower's reset to its leader's log start, R53) puts them below the
// new log start in place of the store's own, in the same write, also
// through a truncation right after it; they survive a reopen. Rows that
// cannot be there (not below the new start, out of order, more than two,
// an invalid set) fail the Apply with ErrInvalidWrite and change nothing.
func testVoterSetsResetRows(t *testing.T, h Harness) {
	s, dir := open(t, h)
	defer func() { closeStore(t, s) }()
	es := Batch(0, 6, 2, 10)
	es[2] = VotersEntry(2, 2, Voters(1))
	mustAppend(t, s, es)
	leader := []protocol.VotersAt{{Offset: 7, Voters: Voters(4)}, {Offset: 30, Voters: Voters(5)}}
	before := snap(t, s)
	bad := map[string][]protocol.VotersAt{
		"row at the new start": {{Offset: 50, Voters: Voters(4)}},
		"out of order":         {leader[1], leader[0]},
		"three rows":           {{Offset: 1, Voters: Voters(3)}, leader[0], leader[1]},
		"invalid set":          {{Offset: 7, Voters: []protocol.Voter{{ID: "a"}}}},
	}
	for name, rows := range bad {
		err := s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: 50, Voters: rows}})
		expectErr(t, "reset with rows "+name, err, storage.ErrInvalidWrite)
		if d := snap(t, s).diff(before); d != "" {
			t.Fatalf("refused reset (%s) changed the store: %s", name, d)
		}
	}
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: 50, Voters: leader}}); err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after a reset with the leader's rows", 7, 4, 30, 5)
	s = h.Reopen(t, s, dir)
	wantVoters(t, s, "after reopen", 7, 4, 30, 5)
	// A reset within the log, then a truncation (a diverging answer below
	// the leader's log start): the rows replace those below, the
	// truncation drops those above.
	mustAppend(t, s, []protocol.Entry{VotersEntry(50, 3, Voters(6)), Batch(51, 1, 3, 10)[0], VotersEntry(52, 3, Voters(7))})
	err := s.Apply([]protocol.Write{
		{Kind: protocol.WriteDeletePrefix, Offset: 52, Voters: []protocol.VotersAt{{Offset: 40, Voters: Voters(8)}}},
		{Kind: protocol.WriteTruncate, Offset: 52},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantVoters(t, s, "after a reset within the log and a truncation", 40, 8)
	if s.LogStart() != 52 || s.LEO() != 52 {
		t.Fatalf("log [%d, %d), want [52, 52)", s.LogStart(), s.LEO())
	}
}

// testVoterSetsOwed: a voter set's owed incarnations (R58) are kept in its
// row, through a reopen, a prefix deletion that keeps the row below the
// log start, and a reset that records the leader's rows; a reset row with
// an invalid owed list is refused and changes nothing.
func testVoterSetsOwed(t *testing.T, h Harness) {
	s, dir := open(t, h)
	defer func() { closeStore(t, s) }()
	owed := []protocol.Voter{{ID: "gone", DirID: "old"}}
	es := Batch(0, 6, 1, 10)
	es[2] = protocol.Entry{Offset: 2, Epoch: 1, Type: protocol.EntryVoters, Data: protocol.EncodeVoterSet(Voters(1), owed)}
	mustAppend(t, s, es)
	want := VoterSetsString([]protocol.VotersAt{{Offset: 2, Voters: Voters(1), Owed: owed}})
	if got := VoterSetsString(s.VoterSets()); got != want {
		t.Fatalf("after the append: rows %s, want %s", got, want)
	}
	s = h.Reopen(t, s, dir)
	if got := VoterSetsString(s.VoterSets()); got != want {
		t.Fatalf("after reopen: rows %s, want %s", got, want)
	}
	if err := deletePrefix(s, 4); err != nil {
		t.Fatal(err)
	}
	if got := VoterSetsString(s.VoterSets()); got != want {
		t.Fatalf("after DeletePrefix(4): rows %s, want %s (the set in force at the log start)", got, want)
	}
	before := snap(t, s)
	bad := []protocol.VotersAt{{Offset: 7, Voters: Voters(2), Owed: []protocol.Voter{{ID: Voters(2)[0].ID, DirID: "x"}}}}
	err := s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: 20, Voters: bad}})
	expectErr(t, "reset with a row owing a voter", err, storage.ErrInvalidWrite)
	if d := snap(t, s).diff(before); d != "" {
		t.Fatalf("refused reset changed the store: %s", d)
	}
	leader := []protocol.VotersAt{{Offset: 7, Voters: Voters(2), Owed: owed}}
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: 20, Voters: leader}}); err != nil {
		t.Fatal(err)
	}
	s = h.Reopen(t, s, dir)
	if got, w := VoterSetsString(s.VoterSets()), VoterSetsString(leader); got != w {
		t.Fatalf("after a reset with the leader's rows and a reopen: rows %s, want %s", got, w)
	}
}

// testVoterSetsInvalid: a voters entry whose Data is not a valid voter set
// is refused like any invalid append (ErrInvalidAppend naming its offset)
// and nothing of the Apply is applied, rows included; the valid entries
// of the same shapes (positive control) are accepted.
func testVoterSetsInvalid(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	mustAppend(t, s, []protocol.Entry{VotersEntry(0, 1, Voters(1)), Batch(1, 1, 1, 10)[0]})
	before := snap(t, s)
	raw := func(off uint64, data []byte) protocol.Entry {
		return protocol.Entry{Offset: off, Epoch: 1, Type: protocol.EntryVoters, Data: data}
	}
	valid := protocol.EncodeVoters(Voters(2))
	bad := map[string][]protocol.Write{
		"garbage":        {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, []byte{9, 9, 9})}}},
		"no data":        {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, nil)}}},
		"empty set":      {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, protocol.EncodeVoters(nil))}}},
		"trailing byte":  {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, append(bytes.Clone(valid), 0))}}},
		"cut short":      {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, valid[:len(valid)-1])}}},
		"node twice":     {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{VotersEntry(2, 1, []protocol.Voter{{ID: "a", DirID: "x"}, {ID: "a", DirID: "y"}})}}},
		"no directory":   {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{VotersEntry(2, 1, []protocol.Voter{{ID: "a"}})}}},
		"valid then bad": {{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, valid), Batch(3, 1, 1, 10)[0], raw(4, []byte{1})}}},
		"bad in second write": {
			{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(2, valid)}},
			{Kind: protocol.WriteTruncate, Offset: 1},
			{Kind: protocol.WriteAppend, Entries: []protocol.Entry{raw(1, []byte{1, 1})}},
		},
	}
	for name, ws := range bad {
		err := s.Apply(ws)
		expectErr(t, "Apply "+name, err, storage.ErrInvalidAppend)
		if !strings.Contains(err.Error(), "offset") {
			t.Fatalf("Apply %s: %v does not name the offset", name, err)
		}
		if d := snap(t, s).diff(before); d != "" {
			t.Fatalf("invalid Apply %q changed the store: %s", name, d)
		}
	}
	// Positive control: the valid shapes are accepted.
	mustAppend(t, s, []protocol.Entry{raw(2, valid), Batch(3, 1, 1, 10)[0], VotersEntry(4, 1, Voters(3))})
	wantVoters(t, s, "after the valid append", 0, 1, 2, 2, 4, 3)
}

// testVoterSetsCopies: VoterSets returns copies; changing them changes
// nothing in the store.
func testVoterSetsCopies(t *testing.T, h Harness) {
	s, _ := open(t, h)
	defer closeStore(t, s)
	in := VotersEntry(0, 1, Voters(2))
	mustAppend(t, s, []protocol.Entry{in})
	in.Data[len(in.Data)-1] ^= 0xff // the store keeps no slice of the caller's
	got := s.VoterSets()
	got[0].Voters[0].ID = "changed"
	got[0].Offset = 99
	wantVoters(t, s, "after changing a returned copy", 0, 2)
}

// testKeyCheckpoint: a store that keeps key checkpoints
// (storage.KeyCheckpointStore, docs/protocol.md R76) has none at first,
// returns the newest saved, whole and as its own copy, across a reopen
// and whatever the log's writes did meanwhile (it never reads or drops it:
// the core checks it against the log), and refuses a save once closed.
func testKeyCheckpoint(t *testing.T, h Harness) {
	s, dir := open(t, h)
	ks, ok := s.(storage.KeyCheckpointStore)
	if !ok {
		closeStore(t, s)
		return // a store without checkpoints: the core replays its log
	}
	if cp, ok, err := ks.KeyCheckpoint(); err != nil || ok {
		t.Fatalf("a fresh store's key checkpoint: %+v, %v, %v; want none", cp, ok, err)
	}
	mustAppend(t, s, Batch(0, 10, 1, 16))
	data := []byte("the core's table")
	for i, cp := range []protocol.KeyCheckpoint{{Offset: 5, Epoch: 1, Data: []byte("older")}, {Offset: 10, Epoch: 1, Data: data}} {
		if err := ks.SaveKeyCheckpoint(cp); err != nil {
			t.Fatalf("SaveKeyCheckpoint %d: %v", i, err)
		}
	}
	data[0] = 'X' // the store copied it
	if err := truncate(s, 4); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, Batch(4, 10, 2, 16))
	want := protocol.KeyCheckpoint{Offset: 10, Epoch: 1, Data: []byte("the core's table")}
	check := func(what string, s storage.Store) {
		t.Helper()
		got, ok, err := s.(storage.KeyCheckpointStore).KeyCheckpoint()
		if err != nil || !ok || got.Offset != want.Offset || got.Epoch != want.Epoch || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("%s: key checkpoint %+v, %v, %v; want %+v", what, got, ok, err, want)
		}
		got.Data[0] = 'Y' // the caller's copy
	}
	check("after a truncation and an append", s)
	check("read again", s)
	s = h.Reopen(t, s, dir)
	check("after a reopen", s)
	closeStore(t, s)
	if err := s.(storage.KeyCheckpointStore).SaveKeyCheckpoint(want); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("SaveKeyCheckpoint after Close: %v; want ErrClosed", err)
	}
}
