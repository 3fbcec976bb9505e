package replica

import (
	"time"

	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
)

// Replica is one node's protocol state machine.
type Replica struct {
	// TODO(core): implement.
}

// New restores a replica from store (quorum state, epoch map, LEO, HW
// checkpoint) at time now. The store is only read, never written.
func New(cfg Config, store storage.Store, now time.Time) (*Replica, error) {
	panic("replica: not implemented")
}

// Tick advances the replica's clock to now (never backwards) and fires
// what is due: fetch timeouts, election timeouts, parked fetches whose
// MaxWait passed, check-quorum.
func (r *Replica) Tick(now time.Time) { panic("replica: not implemented") }

// Step handles one inbound message. Malformed or stale messages are
// dropped (and logged).
func (r *Replica) Step(m transport.Message) { panic("replica: not implemented") }

// Propose asks to append records as one batch. The outcome comes later as
// an Ack with this id (immediately, in the next Ready, for errors known at
// once). On a follower the records are forwarded to the leader.
func (r *Replica) Propose(id uint64, records [][]byte) { panic("replica: not implemented") }

// Persisted reports that the write with this Seq (and every earlier one) is
// durable.
func (r *Replica) Persisted(seq uint64) { panic("replica: not implemented") }

// Hint passes advisory membership information.
func (r *Replica) Hint(h Hint) { panic("replica: not implemented") }

// Ready returns and clears what the shell must do now.
func (r *Replica) Ready() Ready { panic("replica: not implemented") }

// HighWatermark returns the current HW: offsets below it are committed.
func (r *Replica) HighWatermark() uint64 { panic("replica: not implemented") }

// Status returns a snapshot of the replica's state.
func (r *Replica) Status() Status { panic("replica: not implemented") }
