package protocol

import (
	"fmt"
	"slices"
)

// Voter is one member of a voter set: a node, and the directory ID of the
// one incarnation of it that votes (its store's identity, made when the
// directory was created). A node whose directory was wiped comes back with
// another DirID and is not this voter (docs/protocol.md R56).
type Voter struct {
	ID    string
	DirID string
}

// MaxVoters bounds a voter set (an encoded set names at most this many).
const MaxVoters = 255

// The first byte of an encoded voter set: votersFormat for a set with no
// owed incarnation (the bytes every set had before owed lists existed),
// votersOwedFormat for one with them.
const (
	votersFormat     = 1
	votersOwedFormat = 2
)

// EncodeVoters encodes a voter set with no owed incarnation:
// EncodeVoterSet(vs, nil).
func EncodeVoters(vs []Voter) []byte { return EncodeVoterSet(vs, nil) }

// EncodeVoterSet encodes a voter set as the Data of an EntryVoters entry:
// a format byte, a count (u8), then each voter's ID and DirID as strings
// (u32 length and bytes), in the order given. With owed incarnations
// (docs/protocol.md R58: each one an automatic replacement removed, whose
// node is owed its place back at another directory) the format byte is 2
// and the voters are followed by the owed ones, encoded the same way; with
// none it is 1 and nothing follows. The caller passes a set that
// ValidateVoterSet accepts.
func EncodeVoterSet(vs, owed []Voter) []byte {
	b := make([]byte, 0, encodedVoterSetSize(vs, owed))
	if len(owed) == 0 {
		b = append(b, votersFormat)
	} else {
		b = append(b, votersOwedFormat)
	}
	b = appendVoterList(b, vs)
	if len(owed) > 0 {
		b = appendVoterList(b, owed)
	}
	return b
}

func appendVoterList(b []byte, vs []Voter) []byte {
	b = append(b, byte(len(vs)))
	for _, v := range vs {
		b = appendString(b, v.ID)
		b = appendString(b, v.DirID)
	}
	return b
}

// encodedVoterSetSize is the length of EncodeVoterSet(vs, owed).
func encodedVoterSetSize(vs, owed []Voter) int {
	n := 2
	for _, v := range vs {
		n += 8 + len(v.ID) + len(v.DirID)
	}
	if len(owed) > 0 {
		n++
		for _, v := range owed {
			n += 8 + len(v.ID) + len(v.DirID)
		}
	}
	return n
}

// DecodeVoters decodes an EntryVoters entry's Data and returns its voters
// (DecodeVoterSet without the owed incarnations).
func DecodeVoters(b []byte) ([]Voter, error) {
	vs, _, err := DecodeVoterSet(b)
	return vs, err
}

// DecodeVoterSet decodes an EntryVoters entry's Data: its voters, and the
// incarnations it owes a place (nil in format 1). Every problem (format,
// lengths, trailing bytes, a set ValidateVoterSet refuses, an empty owed
// list in format 2) is an error wrapping ErrMalformed. The result does not
// alias b.
func DecodeVoterSet(b []byte) (vs, owed []Voter, err error) {
	if len(b) < 2 {
		return nil, nil, fmt.Errorf("%w: voter set of %d bytes", ErrMalformed, len(b))
	}
	if b[0] != votersFormat && b[0] != votersOwedFormat {
		return nil, nil, fmt.Errorf("%w: voter set format %d, want %d or %d", ErrMalformed, b[0], votersFormat, votersOwedFormat)
	}
	d := decoder{b: b, off: 1}
	vs = decodeVoterList(&d)
	if b[0] == votersOwedFormat && d.err == nil {
		if owed = decodeVoterList(&d); d.err == nil && len(owed) == 0 {
			return nil, nil, fmt.Errorf("%w: voter set format %d with no owed incarnation", ErrMalformed, votersOwedFormat)
		}
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("%w: voter set: %w", ErrMalformed, d.err)
	}
	if d.off != len(b) {
		return nil, nil, fmt.Errorf("%w: voter set: %d trailing bytes", ErrMalformed, len(b)-d.off)
	}
	if err := ValidateVoterSet(vs, owed); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return vs, owed, nil
}

// decodeVoterList reads a count (u8) and that many voters.
func decodeVoterList(d *decoder) []Voter {
	n := int(d.u8("voter count"))
	vs := make([]Voter, 0, min(n, (len(d.b)-d.off)/8))
	for i := 0; i < n && d.err == nil; i++ {
		id := d.string("voter id")
		dir := d.string("voter directory id")
		vs = append(vs, Voter{ID: id, DirID: dir})
	}
	return vs
}

// ValidateVoterSet checks a voter set with its owed incarnations: the
// voters as ValidateVoters checks them, at most MaxVoters owed ones, each
// with a non-empty ID and DirID, no node owed twice, and none owed that
// votes.
func ValidateVoterSet(vs, owed []Voter) error {
	if err := ValidateVoters(vs); err != nil {
		return err
	}
	if len(owed) > MaxVoters {
		return fmt.Errorf("%d owed incarnations (at most %d)", len(owed), MaxVoters)
	}
	for i, o := range owed {
		if o.ID == "" || o.DirID == "" {
			return fmt.Errorf("owed incarnation %q with directory %q: both must be non-empty", o.ID, o.DirID)
		}
		if slices.ContainsFunc(owed[:i], func(x Voter) bool { return x.ID == o.ID }) {
			return fmt.Errorf("voter set owes node %q twice", o.ID)
		}
		if slices.ContainsFunc(vs, func(x Voter) bool { return x.ID == o.ID }) {
			return fmt.Errorf("voter set owes node %q a place it has", o.ID)
		}
	}
	return nil
}

// ValidateVoters checks a voter set: 1 to MaxVoters voters, distinct
// non-empty IDs, each with a non-empty DirID.
func ValidateVoters(vs []Voter) error {
	if len(vs) == 0 || len(vs) > MaxVoters {
		return fmt.Errorf("voter set of %d voters (1 to %d)", len(vs), MaxVoters)
	}
	ids := make([]string, 0, len(vs))
	for _, v := range vs {
		if v.ID == "" || v.DirID == "" {
			return fmt.Errorf("voter %q with directory %q: both must be non-empty", v.ID, v.DirID)
		}
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(vs) {
		return fmt.Errorf("voter set names a node twice")
	}
	return nil
}

// VoterChange is what a voter-change request carries (an AppendRequest of
// Type EntryVoters, whose one record is EncodeVoterChange's): add NodeID
// (at the directory it fetches from) or remove it. The leader computes the
// new set from its own (R58).
type VoterChange struct {
	Add    bool
	NodeID string
}

// EncodeVoterChange encodes c: one byte (1 add, 0 remove), then the ID.
func EncodeVoterChange(c VoterChange) []byte {
	b := make([]byte, 1, 1+len(c.NodeID))
	if c.Add {
		b[0] = 1
	}
	return append(b, c.NodeID...)
}

// DecodeVoterChange decodes a voter-change record; an error wraps
// ErrMalformed.
func DecodeVoterChange(b []byte) (VoterChange, error) {
	if len(b) < 2 || b[0] > 1 {
		return VoterChange{}, fmt.Errorf("%w: voter change of %d bytes", ErrMalformed, len(b))
	}
	return VoterChange{Add: b[0] == 1, NodeID: string(b[1:])}, nil
}

// VotersAt is a voter set and the offset of the EntryVoters entry that
// holds it: the set is in force from Offset on.
type VotersAt struct {
	Offset uint64
	Voters []Voter
	// Owed is the set's owed incarnations (R58), nil if none.
	Owed []Voter
}

// KeptVoterRows returns the voter-set rows (in offset order) that a prefix
// deletion up to start keeps of rows: every row at or above start and,
// below it, the newest (the set in force at start) and the newest before
// it whose set differs (the change that put it in force), so that
// retention never forgets who votes, nor the newest change (an automatic
// replacement's second step reads it: docs/protocol.md R55, R58). The
// result may share rows' backing array; rows is not modified. Stores, the
// core's log view and the simulation's mirror all prune with it.
func KeptVoterRows(rows []VotersAt, start uint64) []VotersAt {
	k := 0 // rows[:k] are below start
	for k < len(rows) && rows[k].Offset < start {
		k++
	}
	if k <= 1 {
		return rows
	}
	cur := rows[k-1]
	for i := k - 2; i >= 0; i-- {
		if !slices.Equal(rows[i].Voters, cur.Voters) {
			if i == k-2 {
				return rows[i:]
			}
			return append([]VotersAt{rows[i], cur}, rows[k:]...)
		}
	}
	return rows[k-1:]
}
