package simulation

import (
	"fmt"

	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// The simulated disk: writes the core asks for wait in a queue until their
// simulated completion applies them to the node's durable store.

// issueWrite checks a write against the core's view of its log, applies it
// to that view and queues it for the disk.
func (s *sim) issueWrite(nd *node, w replica.Write) {
	if n := len(nd.pending); n > 0 && w.Seq <= nd.pending[n-1].Seq || w.Seq <= nd.durableSeq {
		s.fail("%s: write seq %d not increasing", nd.id, w.Seq)
		return
	}
	switch w.Kind {
	case replica.WriteAppend:
		s.shadowAppend(nd, w.Entries)
	case replica.WriteTruncate:
		if w.Offset < nd.checked {
			s.fail("%s: truncation to %d removes committed entries: the node held the committed log up to %d (its HW now %d)",
				nd.id, w.Offset, nd.checked, nd.r.HighWatermark())
			return
		}
		if w.Offset < uint64(len(nd.shadow)) {
			nd.shadow = nd.shadow[:w.Offset]
		}
	case replica.WriteHWCheckpoint:
		if w.Offset > nd.r.HighWatermark() || w.Offset > uint64(len(s.committed)) {
			s.fail("%s: HW checkpoint %d above its HW %d or the committed log end %d", nd.id, w.Offset, nd.r.HighWatermark(), len(s.committed))
			return
		}
	case replica.WriteQuorumState:
	default:
		s.fail("%s: unknown write kind %d", nd.id, w.Kind)
		return
	}
	if s.opts.LyingDisk {
		// Sabotage: the write lands in the volatile cache at once and is
		// reported durable; it becomes durable only at the next sync.
		if err := s.apply(nd, w); err != nil {
			s.fail("%s: store rejected %s: %v", nd.id, fmtWrite(w), err)
			return
		}
		nd.durableSeq = w.Seq
		if !nd.reportPending {
			nd.reportPending = true
			s.schedule(0, event{kind: evReport, node: nd.idx, inc: nd.inc})
		}
		s.schedule(s.between(0, 20*s.p.diskMax), event{kind: evSync, node: nd.idx, inc: nd.inc})
		return
	}
	nd.pending = append(nd.pending, w)
	s.schedule(s.between(0, s.p.diskMax), event{kind: evDisk, node: nd.idx, inc: nd.inc, wseq: w.Seq})
}

func (s *sim) shadowAppend(nd *node, es []storage.Entry) {
	for _, e := range es {
		if e.Offset != uint64(len(nd.shadow)) {
			s.fail("%s: append of offset %d, but its log ends at %d", nd.id, e.Offset, len(nd.shadow))
			return
		}
		if e.Type == storage.EntryData {
			ref, ok := s.payloadOf[string(e.Data)]
			if !ok || ref.prop.tooLarge {
				s.fail("%s: appends offset %d with a payload no proposal made (or a refused one): %q", nd.id, e.Offset, e.Data)
				return
			}
			if ref.prop.notLeader {
				s.fail("%s: appends offset %d with a record of proposal %d, which was answered ErrNotLeader (\"nothing was appended\")", nd.id, e.Offset, ref.prop.id)
				return
			}
			ref.prop.appended = true
		}
		if n := len(nd.shadow); n > 0 && e.Epoch < nd.shadow[n-1].epoch {
			s.fail("%s: epochs decrease along the log: offset %d has epoch %d after epoch %d", nd.id, e.Offset, e.Epoch, nd.shadow[n-1].epoch)
			return
		}
		nd.shadow = append(nd.shadow, keyOf(e))
	}
}

// diskDone makes every pending write up to seq durable, in order (a later
// write never lands without the earlier ones), then reports it now or a
// little later (the process may crash in between: durable but unreported).
func (s *sim) diskDone(nd *node, seq uint64) {
	n := 0
	for n < len(nd.pending) && nd.pending[n].Seq <= seq {
		w := nd.pending[n]
		if err := s.apply(nd, w); err != nil {
			s.fail("%s: store rejected %s: %v", nd.id, fmtWrite(w), err)
			return
		}
		nd.durableSeq = w.Seq
		n++
	}
	if n == 0 {
		return // already done by an earlier completion (group commit)
	}
	s.tracef("%s durable up to w%d", nd.id, nd.durableSeq)
	nd.pending = nd.pending[n:]
	if nd.reportPending {
		return
	}
	if s.rng.Float64() < s.p.reportDelayProb {
		nd.reportPending = true
		s.schedule(s.between(0, s.p.diskMax), event{kind: evReport, node: nd.idx, inc: nd.inc})
		return
	}
	s.report(nd)
}

func (s *sim) report(nd *node) {
	if nd.durableSeq <= nd.reportedSeq {
		return
	}
	nd.reportedSeq = nd.durableSeq
	s.hash.byte(0xB3)
	s.hash.u64(nd.reportedSeq)
	s.tracef("%s persisted(w%d)", nd.id, nd.reportedSeq)
	nd.r.Persisted(nd.reportedSeq)
	s.afterInput(nd)
}

func (s *sim) apply(nd *node, w replica.Write) error {
	st := nd.store
	switch w.Kind {
	case replica.WriteAppend:
		return st.Append(w.Entries)
	case replica.WriteTruncate:
		return st.TruncateSuffix(w.Offset)
	case replica.WriteQuorumState:
		old, _ := st.QuorumState()
		if w.Quorum.Epoch < old.Epoch {
			s.fail("%s: durable epoch goes back from %d to %d", nd.id, old.Epoch, w.Quorum.Epoch)
		} else if w.Quorum.Epoch == old.Epoch && old.VotedFor != "" && w.Quorum.VotedFor != old.VotedFor {
			s.fail("%s: durable vote in epoch %d changes from %s to %q", nd.id, old.Epoch, old.VotedFor, w.Quorum.VotedFor)
		}
		if w.Quorum.VotedFor != "" {
			nd.votes[w.Quorum.Epoch] = w.Quorum.VotedFor
		}
		return st.SetQuorumState(w.Quorum)
	case replica.WriteHWCheckpoint:
		return st.SetHWCheckpoint(w.Offset)
	}
	return fmt.Errorf("unknown write kind %d", w.Kind)
}
