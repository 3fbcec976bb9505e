package shell

import (
	"errors"

	"github.com/replog-io/replog/protocol"
)

// ErrNoCursor is an EventCursorRead's Err: the cursor was never committed
// (or its first commit is not readable on this node yet).
var ErrNoCursor = errors.New("replog: no such cursor")

// ProposeKeyed is the event of a keyed proposal (replica.ProposeKeyed,
// docs/protocol.md R61-R64): a producer's retry is resolved with the
// original's offset, a caller ID seen within the window with the
// original's offset and replica.ErrDuplicate.
func ProposeKeyed(id uint64, key protocol.Key, records [][]byte) Event {
	return Event{Kind: EventPropose, ID: id, Records: records, Key: key}
}

// CommitCursor is the event of a cursor commit (replica.ProposeCursor,
// R65): cursor name at position next, resolved with the offset of its
// entry once committed.
func CommitCursor(id uint64, key protocol.Key, name string, next uint64) Event {
	return Event{Kind: EventCursor, ID: id, Key: key, Cursor: name, Offset: next}
}

// LogChange is the event of a log change (replica.ProposeLogChange, R80):
// create log name with spec, or delete it (spec empty), resolved with the
// offset of its entry once committed, or with the refusal. The core owns
// spec from then on.
func LogChange(id uint64, key protocol.Key, name string, spec []byte) Event {
	return Event{Kind: EventLogChange, ID: id, Key: key, Name: name, Spec: spec}
}

// CursorRead is the event of a cursor read (replica.Cursor): cursor name's
// position as of this node's readable HW, resolved in the round it is fed
// to, with the position as Offset, or ErrNoCursor.
func CursorRead(id uint64, name string) Event {
	return Event{Kind: EventCursorRead, ID: id, Cursor: name}
}

// readCursor answers a cursor read event: it appends nothing, so it is
// resolved at once, in this round.
func (n *Node) readCursor(ev Event) {
	res := Resolved{ID: ev.ID}
	next, ok := n.r.Cursor(ev.Cursor)
	if ok {
		res.Offset = next
	} else {
		res.Err = ErrNoCursor
	}
	n.reads = append(n.reads, res)
}
