// Package replica holds replog's protocol core: one replica's state machine
// for Kafka's pull-based replication (the seed's LEO/HW rules with KIP-101 /
// KIP-279 leader epochs) and KRaft-style elections (KIP-595, KIP-996
// pre-vote).
//
// The core is deterministic: no goroutines, no sockets, no wall clock, no
// global randomness. It takes events through Tick, Step, Propose, Persisted
// and Hint, and says what to do through Ready. The shell around it (the root
// replog package, or the simulation) owns time, the network and the disk.
//
// The shell's loop is:
//
//	r.Tick(now)               // and/or Step, Propose, Persisted, Hint
//	rd := r.Ready()
//	queue rd.Writes to the storage writer, in order;
//	    after each is durable call r.Persisted(w.Seq)
//	send rd.Messages (they may be sent at once: the core holds back any
//	    message that depends on a write until that write is persisted)
//	deliver rd.Acks to the waiting callers
//
// What the core owns: the protocol state (role, epoch, vote, leader, HW,
// the leader's view of its followers, the fetcher, forwarded proposals)
// and the tail of the log it has asked to write but not yet seen persisted
// (etcd raft's "unstable"), which it keeps in memory. It reads the durable
// part of its log through the LogReader given to New, never writes to it,
// and is the only one to decide what is written: the shell writes exactly
// the Writes of Ready, in order, and nothing else, to the log behind that
// LogReader.
//
// Contract details for the shell:
//
//   - Call Ready after every batch of events: parked fetches are woken, and a
//     follower's next fetch is built, inside Ready.
//   - Apply Writes strictly in Seq order, never skip one, and call Persisted
//     with the highest Seq that is durable (one call may cover many writes).
//     Any run of writes may go to one storage Apply (one transaction: the
//     shell's group commit). A write
//     that fails is fatal for this replica: stop it and open a new one from
//     the store (New), as after a crash. A Replica must never be reused
//     after its writes were lost.
//   - Messages in Ready may be sent at once, in order: the core holds back
//     what depends on an unpersisted write (a granted vote, vote requests
//     after the self-vote, anything after adopting an epoch, a follower's
//     fetch after its appended entries) and releases it in a later Ready.
//     The leader does send entries it has not persisted itself (it counts
//     itself for the HW with its durable LEO only).
//   - Give Ready's KeyCheckpoint, when there is one, to the store that
//     keeps it (KeyCheckpointReader on the way back), at any time, durably
//     or not; or drop it (the table is then rebuilt from the log start
//     after a restart). New uses a checkpoint only if it describes the log
//     (R76).
//   - Tick when an event comes and at NextDeadline (docs/protocol.md R96,
//     R97): the core's timers fire only on Tick, its clock is the last
//     Tick's time, and a Tick before NextDeadline, with no other event,
//     does nothing. Ticking more often is harmless, and wasted.
//   - Entry Data in Writes and in outgoing messages is shared, read-only:
//     nobody may modify it.
//   - An Ack without error for a proposal made on a follower means the
//     leader's HW passed it; this replica's own HW may still lag one fetch
//     round.
//   - Status().Violations counts invariant violations detected (a
//     truncation below the HW, refused); it must stay 0.
//   - Check Err after each Ready: a replica that was asked to destroy
//     committed entries (ErrCommittedTruncation) or ran out of epochs
//     (ErrEpochExhausted) halts, and the shell must stop the node loudly.
//
// Messages are judged on their own, even from authenticated peers (defence
// in depth): only a voter of Config.Voters is ever followed as leader (a
// HintLeader only says where to fetch; the epoch comes from that voter's
// own answer); an answer counts only for the request it answers (a fetch
// answer by FetchID, a vote answer by its round), else it is dropped whole,
// epoch included; a vote request for a later epoch is disregarded while
// this replica leads or hears from its leader; epochs at or above MaxEpoch,
// or more than MaxEpochJump ahead, are dropped; votes and fetches of
// non-voters never count, and forwarded appends are taken only from voters
// and from observers that fetch from this leader, and only in the epoch
// they name; a truncation below the HW is refused and halts the replica.
//
// Who may touch it: a Replica is not safe for concurrent use. One
// goroutine (the shell's loop) drives it, through the methods above only;
// other goroutines learn its state from what that loop publishes (Status,
// HighWatermark, ReadableHW copied out). The core starts no goroutines and
// reads no clock or global randomness (Config.Rand).
//
// # Inside the package
//
// Step dispatches in two stages, like etcd raft's Step and its step
// functions: stepCommon (step.go) does what every role does the same (the
// addressee and sender, epoch bounds and the voters a message names, vote
// requests, BeginEpoch, answers to forwarded appends, fencing of fetch
// requests by epoch), then the role's own step function takes the rest:
// stepLeader, stepFollower (a voter following and an observer),
// stepProspective or stepCandidate. Tick and Ready dispatch by role too.
//
// The files, each named for what it holds, and the layers of calls between
// them (a layer calls only the layers below it, never one above):
//
//	step.go, replica.go (New, Tick, Propose, Persisted, Ready), hint.go
//	    entry points: dispatch to the handlers; deadline.go
//	    (NextDeadline) only reads
//	election.go (vote requests and answers, BeginEpoch), bootstrap.go,
//	leader.go (fetch fencing and serving, check-quorum), follower.go
//	(fetch responses, fetch timers), forward.go (forwarded proposals, both
//	sides, and the memo of answers), voters.go (voter changes),
//	retention.go, transfer.go, producers.go, keys.go
//	    handlers: they decide, and change role only through transitions;
//	    a handler whose write or new HW may change whether this replica
//	    may campaign calls settleRole right after it (a leader,
//	    resignIfRemoved)
//	transitions.go (becomeFollower/Prospective/Candidate/Leader, stepDown,
//	settleRole, resignIfRemoved, restoreRole)
//	    role changes, the only code that assigns the role: they call each
//	    other (an election that wins at once) and the layers below, never
//	    a handler
//	leader.go (updateLeaderHW, ackUpTo, leaderPropose), follower.go
//	(updateFollowerHW), forward.go (abandonForwarded, failProposal),
//	election.go (countVotes, logUpToDate)
//	    bookkeeping of one role's state: it moves no role
//	writes.go (send, emit, appendEntries, truncate), retention.go
//	(resetLog, deletePrefix), with what a write records: voters.go
//	(refreshVoters, the set in force), keys.go (the key table), log.go
//	(logView over the LogReader)
//	    writes: they record log and voter-set state, never a role
//	status.go, ready.go, config.go, errors.go
//	    plumbing and types
//
// internal/bugs holds the deliberate bugs that replog_bug_* build tags
// turn on, for tests only: its doc lists each tag, the rule it breaks and
// the tests that must fail with it.
//
// layers_test.go checks the two claims about roles: only transitions.go
// assigns one, and no write or HW bookkeeping reaches a transition.
package replica
