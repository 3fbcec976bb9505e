package replica

import (
	"errors"
	"fmt"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// Keyed proposals: the leader recognises a producer's retry and a caller
// ID seen within the deduplication window (docs/protocol.md R61–R65).

// ErrDuplicate is the error of a keyed proposal whose caller ID was
// appended within Config.DedupWindow (R64): nothing was appended, and the
// Ack's FirstOffset is the original's, committed.
var ErrDuplicate = errors.New("replog: duplicate append")

// ProposeKeyed is Propose for a batch carrying key (R61): a retry of the
// same producer sequence number is answered with the original's offset
// instead of appending again (R63), and a caller ID appended within
// DedupWindow gets the original's offset with ErrDuplicate (R64). The
// batch is in the log whole or not at all. key must not be zero; its ID
// at most protocol.MaxKeyLength bytes (else ErrTooLarge).
func (r *Replica) ProposeKeyed(id uint64, key protocol.Key, records [][]byte) {
	r.proposeKeyed(id, protocol.EntryKeyed, key, records)
}

// ProposeCursor asks to record cursor name at position next (R65): a keyed
// proposal (key must carry a producer, so that a retried commit never
// lands after a newer one) of one EntryState entry. The Ack carries the
// entry's offset once committed. name is 1 to protocol.MaxKeyLength bytes
// (else ErrTooLarge).
func (r *Replica) ProposeCursor(id uint64, key protocol.Key, name string, next uint64) {
	if name == "" || len(name) > protocol.MaxKeyLength {
		r.acks = append(r.acks, Ack{ID: id, Err: fmt.Errorf("%w: a cursor name is 1 to %d bytes", ErrTooLarge, protocol.MaxKeyLength)})
		return
	}
	rec := protocol.EncodeStateRecords(nil, protocol.StateRecord{Kind: protocol.StateCursor, Name: name, Next: next})
	r.proposeKeyed(id, protocol.EntryState, key, [][]byte{rec})
}

// Cursor returns cursor name's position as of this replica's readable HW
// (what is committed and durable here), and whether it has one.
func (r *Replica) Cursor(name string) (uint64, bool) {
	c, ok := r.keys.cursors[name]
	limit := min(r.hw, r.log.durableEnd)
	if ok && c.at < limit {
		return c.next, true
	}
	// The newest value is above the readable HW: the undo records hold
	// the ones before it.
	for i := len(r.keys.undo) - 1; i >= 0; i-- {
		u := r.keys.undo[i]
		if u.kind != protocol.StateCursor || u.name != name || u.off < limit {
			continue
		}
		c = u.prevCursor
		if c == nil || c.at < limit {
			break
		}
	}
	if c == nil || c.at >= limit {
		return 0, false
	}
	return c.next, true
}

func (r *Replica) proposeKeyed(id uint64, typ protocol.EntryType, key protocol.Key, records [][]byte) {
	if r.err == nil && (key.IsZero() || len(records) == 0 || len(key.ID) > protocol.MaxKeyLength || len(key.EntryKey) > protocol.MaxKeyLength) {
		r.acks = append(r.acks, Ack{ID: id, Err: fmt.Errorf("%w: a keyed proposal needs a key (an ID and an entry key of at most %d bytes each) and records", ErrTooLarge, protocol.MaxKeyLength)})
		return
	}
	if r.err == nil && key.EntryKey != "" && r.level < protocol.FeatureLevelKeys {
		// R102: a node of a release before keys would refuse the entry's
		// header; refused here too so that a follower's caller learns it
		// without a round trip.
		r.acks = append(r.acks, Ack{ID: id, Err: r.entryKeyLevelTooLow()})
		return
	}
	if r.refuseAtOnce(id, records) {
		return
	}
	switch {
	case r.role == RoleLeader:
		if r.holdProposal(heldProposal{id: id, typ: typ, records: records, key: key}) {
			return // a transfer is under way (R59)
		}
		r.leaderKeyed(proposal{id: id, local: true}, typ, records, key)
	case r.leaderID != "":
		h := protocol.EncodeKeyHeader(protocol.KeyHeader{Key: key, N: uint64(len(records))})
		r.forward(id, typ, append(slices.Clip(records), h))
	default:
		r.acks = append(r.acks, Ack{ID: id, Err: &NotLeaderError{}})
	}
}

// forwardedKeyed is the leader's side of a forwarded keyed request: its
// last record is the key header. A peer's state entries may hold cursor
// records and log changes only (the copies of R66 and R81 are the
// leader's alone to write). It
// reports whether the request was malformed (answered TooLarge, nothing
// appended).
func (r *Replica) forwardedKeyed(from string, req *protocol.AppendRequest) (protocol.Key, [][]byte, bool) {
	n := len(req.Records) - 1
	if n < 1 {
		return protocol.Key{}, nil, false
	}
	h, err := protocol.DecodeKeyHeader(req.Records[n])
	if err != nil || h.N != uint64(n) || h.IsZero() {
		return protocol.Key{}, nil, false
	}
	if req.Type == protocol.EntryState {
		for _, rec := range req.Records[:n] {
			rs, err := protocol.DecodeStateRecords(rec)
			if err != nil || len(rs) != 1 || h.Producer == 0 || !peerStateRecord(h.Key, rs[0], n) {
				return protocol.Key{}, nil, false
			}
		}
	}
	return h.Key, req.Records[:n], true
}

// peerStateRecord reports whether a peer may propose state record rec in
// a batch of n records with key: a cursor commit (R65), or a log change
// alone in its batch (R80; a copy's creating offset is the leader's to
// write, R81).
func peerStateRecord(key protocol.Key, rec protocol.StateRecord, n int) bool {
	switch rec.Kind {
	case protocol.StateCursor:
		return rec.Name != ""
	case protocol.StateLog:
		return n == 1 && rec.First == 0 && logChangeInvalid(key, rec.Name, rec.Data) == nil
	}
	return false
}

// leaderKeyed decides a keyed proposal on the leader (R63, R64): answered
// from the table, or appended with the key header on its last entry.
func (r *Replica) leaderKeyed(p proposal, typ protocol.EntryType, records [][]byte, key protocol.Key) {
	if r.keys.applied < r.log.LEO() && !r.keysCatchUp() {
		// The table does not cover the log yet (a restart): decide once
		// it does (R62).
		r.keys.waiting = append(r.keys.waiting, heldProposal{id: p.id, from: p.from, requestID: p.requestID, typ: typ, records: records, key: key})
		return
	}
	if key.Producer != 0 {
		if ps := r.keys.producers[key.Producer]; ps != nil {
			if key.Seq < ps.low {
				// Answered at the producer already: a late copy nobody
				// waits for. Never appended.
				r.failProposal(p, r.id)
				return
			}
			if s, ok := ps.seqs[key.Seq]; ok {
				r.ackExisting(p, s.first, s.n, false)
				return
			}
		}
	}
	if key.ID != "" {
		if s := r.keys.ids[key.ID]; s != nil && !r.idExpired(s) {
			r.ackExisting(p, s.first, s.n, true)
			return
		}
	}
	if r.refuseEntryKey(p, key) { // R102: after the retry checks too
		return
	}
	if r.refuseLogChange(p, typ, records) { // R80: after the retry checks too
		return
	}
	if r.backlogRefuses(p, typ, records) { // R74: after the retry checks, which append nothing
		return
	}
	// The header on the stack: KeyedData copies it into the entry.
	var hb [protocol.MaxKeyHeaderLength]byte
	h := protocol.AppendKeyHeader(hb[:0], protocol.KeyHeader{Key: key, N: uint64(len(records))})
	var kb []byte // the entry-key-only header of the entries before the last (R102)
	if key.EntryKey != "" && len(records) > 1 {
		kb = protocol.AppendEntryKeyHeader(nil, key.EntryKey)
	}
	leo := r.log.LEO()
	entries := make([]protocol.Entry, len(records))
	for i, rec := range records {
		hh := kb
		if i == len(records)-1 {
			hh = h
		}
		entries[i] = protocol.Entry{Offset: leo + uint64(i), Epoch: r.epoch, Time: r.now.UnixMilli(), Type: typ, Data: protocol.KeyedData(hh, rec)}
	}
	p.first, p.end = leo, leo+uint64(len(records))
	r.leader.pending = append(r.leader.pending, p)
	r.noteBacklog(typ, records, p.end)
	r.appendEntries(entries)
}

// entryKeyLevelTooLow is the error of an entry-keyed proposal below
// FeatureLevelKeys.
func (r *Replica) entryKeyLevelTooLow() error {
	return fmt.Errorf("%w: an entry key needs level %d, the cluster runs at %d", ErrFeatureLevelTooLow, protocol.FeatureLevelKeys, r.level)
}

// refuseEntryKey is the leader's part of R102's level gate: it reports
// whether p, carrying key, was refused (answered, nothing appended)
// because it has an entry key and the cluster runs below
// FeatureLevelKeys. A follower refuses before forwarding; the leader
// checks again because its level is the one the entry is written at.
func (r *Replica) refuseEntryKey(p proposal, key protocol.Key) bool {
	if key.EntryKey == "" || r.level >= protocol.FeatureLevelKeys {
		return false
	}
	if p.local {
		r.acks = append(r.acks, Ack{ID: p.id, Err: r.entryKeyLevelTooLow()})
		return true
	}
	r.memo.set(doneKey{p.from, p.requestID}, forwardMemo{state: forwardDeclined, code: protocol.AppendFeatureLevelTooLow})
	r.send(p.from, &protocol.AppendResponse{RequestID: p.requestID, Error: protocol.AppendFeatureLevelTooLow, LeaderID: r.id})
	return true
}

// ackExisting answers p with a batch already in the log at [first,
// first+n): at once if committed, else when it commits (the pending list,
// kept in order of end), or with an unknown outcome if this leadership ends
// first, as for the original.
func (r *Replica) ackExisting(p proposal, first, n uint64, dup bool) {
	p.first, p.end, p.dup = first, first+n, dup
	ls := r.leader
	i, _ := slices.BinarySearchFunc(ls.pending, p.end, func(q proposal, end uint64) int {
		if q.end <= end {
			return -1
		}
		return 1
	})
	ls.pending = slices.Insert(ls.pending, i, p)
	r.ackUpTo(r.hw)
}

// keysRound runs in every Ready: the table catches up with the log; a
// leader decides the keyed proposals it held meanwhile, a replica that no
// longer leads refuses them (never appended: a local one may be proposed
// again, a forwarded one is answered unknown, which the forwarder retries).
func (r *Replica) keysRound() {
	caughtUp := r.keysCatchUp()
	w := r.keys.waiting
	if len(w) == 0 || r.role == RoleLeader && !caughtUp {
		return
	}
	r.keys.waiting = nil
	for _, h := range w {
		p := proposal{id: h.id, local: h.from == "", from: h.from, requestID: h.requestID}
		if r.role != RoleLeader {
			if p.local {
				r.acks = append(r.acks, Ack{ID: p.id, Err: &NotLeaderError{LeaderID: r.leaderID}})
			} else {
				r.failProposal(p, r.leaderID)
			}
			continue
		}
		r.leaderKeyed(p, h.typ, h.records, h.key)
	}
}
