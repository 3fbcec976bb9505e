package shell

import "github.com/replog-io/replog/protocol"

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

// Cursor returns cursor name's position as of this node's readable HW, and
// whether it has one (replica.Cursor).
func (n *Node) Cursor(name string) (uint64, bool) { return n.r.Cursor(name) }
