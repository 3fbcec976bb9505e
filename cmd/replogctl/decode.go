package main

import (
	"encoding/base64"
	"fmt"
	"sort"

	"github.com/replog-io/replog/protocol"
)

// dumpLine is one line of dump's output: an entry as stored, decoded.
// The protocol wraps what it stores (a keyed record carries its key
// header in front of the user's bytes; voter sets, cursor commits and
// the leader's copies of keys are encodings of their own), so dump
// decodes each type with the protocol package's decoders and prints the
// record as the user appended it, never the wrapper as if it were data.
type dumpLine struct {
	Offset uint64 `json:"offset"`
	Epoch  uint64 `json:"epoch"`
	// Type is the stored entry type (protocol.EntryType): "data" and
	// "keyed" hold a user's record (readers see them), "control",
	// "voters" and "state" are the protocol's own (readers never see
	// them).
	Type string `json:"type"`
	// Kind says what the entry is for: "record" (a user's record),
	// "epoch-start" (a control entry, the first of its epoch: the new
	// leader's, or the epoch's first barrier), "barrier" (a later control
	// entry: Log.Barrier, WaitReady, Cursor), "control" (a control entry
	// at the log start, where the epoch map no longer tells whether it
	// began its epoch), "voter-set", "cursor" (a CommitCursor),
	// "key-copies" (the leader's copies of live keys, kept above the log
	// start), or "unknown".
	Kind string `json:"kind"`
	// Time is when the leader appended the entry, in milliseconds since
	// the Unix epoch (0: unknown).
	Time int64 `json:"time"`
	// Data is a record's bytes as the user appended them (base64); absent
	// on the protocol's entries.
	Data *string `json:"data,omitempty"`
	// Key is the key of a keyed batch, on the batch's last entry (where
	// the protocol stores it) and on a cursor commit.
	Key *keyJSON `json:"key,omitempty"`
	// Voters and Owed are a voter set's voters and the incarnations it
	// owes a place (R58), node/directory each.
	Voters []string `json:"voters,omitempty"`
	Owed   []string `json:"owed,omitempty"`
	// State is a state entry's records: cursor positions, or the leader's
	// copies of producers' and IDs' records.
	State []stateJSON `json:"state,omitempty"`
	// Raw is the stored bytes (base64) of an entry that does not decode,
	// and Malformed why: dump shows them rather than hide them.
	Raw       string `json:"raw,omitempty"`
	Malformed string `json:"malformed,omitempty"`
}

// keyJSON is a keyed batch's key (protocol.KeyHeader).
type keyJSON struct {
	// Producer is the appending Log's producer ID (16 hex digits; absent
	// for an append keyed by ID only), Seq its sequence number for the
	// batch, Low the lowest one it still waited for.
	Producer string `json:"producer,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	Low      uint64 `json:"low,omitempty"`
	// ID is the caller's ID (replog.WithID), if any.
	ID string `json:"id,omitempty"`
	// First and Entries are the batch: offsets [First, First+Entries).
	First   uint64 `json:"first"`
	Entries uint64 `json:"entries"`
}

// stateJSON is one keyed state record (protocol.StateRecord).
type stateJSON struct {
	// Kind is "cursor", "producer" or "id".
	Kind string `json:"kind"`
	// Name and Next: a cursor's name and position (the next offset its
	// consumer reads).
	Name string  `json:"name,omitempty"`
	Next *uint64 `json:"next,omitempty"`
	// Producer, Low and Seqs: a copy of a producer's record.
	Producer string   `json:"producer,omitempty"`
	Low      uint64   `json:"low,omitempty"`
	Seqs     []seqRow `json:"seqs,omitempty"`
	// ID, First and Entries: a copy of a caller ID's record.
	ID      string `json:"id,omitempty"`
	First   uint64 `json:"first,omitempty"`
	Entries uint64 `json:"entries,omitempty"`
	// Time is the producer's last activity or the ID's entry time (ms).
	Time int64 `json:"time,omitempty"`
}

// seqRow is where a producer's sequence number was appended.
type seqRow struct {
	Seq     uint64 `json:"seq"`
	First   uint64 `json:"first"`
	Entries uint64 `json:"entries"`
}

// producerID renders a producer ID: hex, because JSON tools that read
// numbers as doubles would round a random 64-bit ID.
func producerID(p uint64) string { return fmt.Sprintf("%016x", p) }

// epochStarts maps each epoch's first offset, as the epoch map has it.
type epochStarts struct {
	starts   []uint64 // ascending
	logStart uint64
}

func newEpochStarts(rows []protocol.EpochStart, logStart uint64) epochStarts {
	es := epochStarts{logStart: logStart}
	for _, r := range rows {
		es.starts = append(es.starts, r.StartOffset)
	}
	sort.Slice(es.starts, func(i, j int) bool { return es.starts[i] < es.starts[j] })
	return es
}

// controlKind labels a control entry at off. The store keeps no mark of
// why a control entry was appended; what tells them apart is where it
// sits: the first entry of an epoch is its leader's (appended when it was
// elected, or its epoch's first barrier), any later one a barrier. A
// deletion moves the first row of the epoch map up to the log start, so
// at a log start above 0 it cannot tell.
func (es epochStarts) controlKind(off uint64) string {
	i := sort.Search(len(es.starts), func(i int) bool { return es.starts[i] >= off })
	switch {
	case i == len(es.starts) || es.starts[i] != off:
		return "barrier"
	case off == es.logStart && es.logStart > 0:
		return "control"
	}
	return "epoch-start"
}

// decodeEntry decodes a stored entry for dump.
func decodeEntry(en protocol.Entry, epochs epochStarts) dumpLine {
	l := dumpLine{Offset: en.Offset, Epoch: en.Epoch, Type: en.Type.String(), Time: en.Time}
	malformed := func(err error) dumpLine {
		l.Raw = base64.StdEncoding.EncodeToString(en.Data)
		l.Malformed = err.Error()
		return l
	}
	switch en.Type {
	case protocol.EntryData:
		l.Kind = "record"
		l.Data = b64(en.Data)
	case protocol.EntryControl:
		l.Kind = epochs.controlKind(en.Offset)
		if len(en.Data) > 0 {
			return malformed(fmt.Errorf("a control entry with %d bytes of data", len(en.Data)))
		}
	case protocol.EntryVoters:
		l.Kind = "voter-set"
		vs, owed, err := protocol.DecodeVoterSet(en.Data)
		if err != nil {
			return malformed(err)
		}
		l.Voters = voterNames(vs)
		if len(owed) > 0 {
			l.Owed = voterNames(owed)
		}
	case protocol.EntryKeyed:
		l.Kind = "record"
		h, rest, err := splitKey(en)
		if err != nil {
			return malformed(err)
		}
		l.Key, l.Data = h, b64(rest)
	case protocol.EntryState:
		h, rest, err := splitKey(en)
		if err != nil {
			return malformed(err)
		}
		rs, err := protocol.DecodeStateRecords(rest)
		if err != nil {
			return malformed(err)
		}
		// A cursor commit is an append with a key; the leader's copies of
		// live keys carry none.
		l.Kind, l.Key = "cursor", h
		if h == nil {
			l.Kind = "key-copies"
		}
		for _, r := range rs {
			l.State = append(l.State, stateRecord(r))
		}
	default:
		l.Kind = "unknown"
		return malformed(fmt.Errorf("unknown entry type %d", uint8(en.Type)))
	}
	return l
}

// splitKey separates a keyed or state entry's key header (nil if it has
// none: a keyed batch's entries before its last, the leader's key
// copies) from the rest.
func splitKey(en protocol.Entry) (*keyJSON, []byte, error) {
	hb, rest, err := protocol.SplitKeyed(en.Data)
	if err != nil || len(hb) == 0 {
		return nil, rest, err
	}
	h, err := protocol.DecodeKeyHeader(hb)
	if err != nil {
		return nil, nil, err
	}
	if h.N > en.Offset+1 {
		return nil, nil, fmt.Errorf("key header of a batch of %d entries ending at offset %d", h.N, en.Offset)
	}
	k := &keyJSON{Seq: h.Seq, Low: h.Low, ID: h.ID, First: en.Offset + 1 - h.N, Entries: h.N}
	if h.Producer != 0 {
		k.Producer = producerID(h.Producer)
	}
	return k, rest, nil
}

func stateRecord(r protocol.StateRecord) stateJSON {
	switch r.Kind {
	case protocol.StateCursor:
		next := r.Next
		return stateJSON{Kind: "cursor", Name: r.Name, Next: &next}
	case protocol.StateProducer:
		s := stateJSON{Kind: "producer", Producer: producerID(r.Producer), Low: r.Low, Time: r.Time}
		for _, q := range r.Seqs {
			s.Seqs = append(s.Seqs, seqRow{Seq: q.Seq, First: q.First, Entries: q.N})
		}
		return s
	case protocol.StateID:
		return stateJSON{Kind: "id", ID: r.Name, First: r.First, Entries: r.N, Time: r.Time}
	}
	return stateJSON{Kind: fmt.Sprintf("kind(%d)", r.Kind)}
}

func b64(b []byte) *string {
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}
