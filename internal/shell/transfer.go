package shell

import "github.com/replog-io/replog/replica"

// Transfer is the event of a leadership transfer (replica.TransferLeadership,
// docs/protocol.md R59): hand this node's leadership over to voter to ("":
// the most caught-up voter). It is resolved as a proposal is, without an
// offset: nil once the leadership was handed over (EndEpoch sent, the core
// stepped down), or the core's refusal (a *replica.NotLeaderError,
// replica.ErrNoSuccessor, replica.ErrTransferInProgress: nothing started)
// or outcome (replica.ErrTransferTimedOut: the core leads on; a
// *replica.NotLeaderError: the leadership ended otherwise first).
// Proposals made while it is under way wait in the core; when it
// completes they are resolved with a *replica.NotLeaderError naming the
// successor (never appended: send them again).
func Transfer(id uint64, to string) Event { return Event{Kind: EventTransfer, ID: id, To: to} }

// transferKey names one transfer of the core: its successor and epoch.
type transferKey struct {
	to    string
	epoch uint64
}

// transferWaits are the transfer events waiting for their core transfer
// to end (in ID order of arrival), and the refusals of this round.
type transferWaits struct {
	waiting []transferWait
	refused []Resolved
}

type transferWait struct {
	id  uint64
	key transferKey
}

// transfer feeds a transfer event to the core. A refusal is resolved in
// this round; an accepted event waits for the outcome of the transfer it
// started or joined.
func (n *Node) transfer(ev Event) {
	n.wait(ev.ID)
	if err := n.r.TransferLeadership(ev.To); err != nil {
		n.transfers.refused = append(n.transfers.refused, Resolved{ID: ev.ID, Err: err})
		return
	}
	to, epoch, _ := n.r.Transfer()
	n.transfers.waiting = append(n.transfers.waiting, transferWait{id: ev.ID, key: transferKey{to, epoch}})
}

// transfersResolved resolves this round's refused transfer events, and
// those whose core transfer ended (results).
func (n *Node) transfersResolved(results []replica.TransferResult) []Resolved {
	t := &n.transfers
	var out []Resolved
	for _, r := range t.refused {
		delete(n.pending, r.ID)
		out = append(out, r)
	}
	t.refused = t.refused[:0]
	for _, res := range results {
		key := transferKey{res.To, res.Epoch}
		kept := t.waiting[:0]
		for _, w := range t.waiting {
			if _, ok := n.pending[w.id]; !ok {
				continue // resolved already (Close, a halt)
			}
			if w.key != key {
				kept = append(kept, w)
				continue
			}
			delete(n.pending, w.id)
			out = append(out, Resolved{ID: w.id, Err: res.Err})
		}
		t.waiting = kept
	}
	return out
}
