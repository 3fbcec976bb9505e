// Package membership is replog's discovery layer: it wraps
// hashicorp/memberlist so that nodes find each other by gossip, learn each
// other's replication (RPC) addresses, and pass on liveness and leader
// hints (Hint, in this package's own vocabulary) for the node's shell to
// hand to the protocol core.
//
// # What it owns, and who may use it
//
// It owns the gossip socket (Config.BindAddr, TCP and UDP), the member
// table (node ID → RPC address, voter flag, last advertised leader and
// epoch, gossip's opinion of liveness) and this node's metadata. It
// imports neither the core nor the transport: the shell (the root replog
// package) creates one Membership per node when gossip is configured,
// uses Resolve as the transport's Resolver, advertises the leader the core
// knows with SetLeader, and turns each Hint into the core's input
// (hints.go in the root). Nothing else imports it but tests (the
// hostile-peer suite joins a cluster with forged metadata).
//
// Everything this package says about other nodes is advisory
// (docs/protocol.md, R30 in section 3.4): gossip liveness may only make an
// election start sooner, never decide one, and a gossiped leader claim is
// verified by fetching from it (epoch fencing), never trusted. In
// particular:
//
//   - Resolve returns the last RPC address a node advertised, even when
//     gossip thinks the node is dead: gossip may be wrong, the transport
//     finds out for itself.
//   - Hints may be late, duplicated, dropped (the channel is bounded) or
//     wrong (a live but slow node may be declared dead and then refute).
//
// Each node advertises, in memberlist's node metadata (at most 512 bytes,
// see MaxMetaSize): its node ID (also its memberlist name), the cluster ID,
// its RPC address, whether it is a voter, and the leader and epoch it knows.
// Members with undecodable metadata or another cluster ID are ignored and
// logged. Gossip is encrypted and authenticated only with Config.SecretKey
// (the root passes Options.GossipKey, derived from Options.Secret unless
// set); without it anyone who reaches the gossip port can join and
// advertise. Either way, a member's word is a hint, never a decision.
//
// # Concurrency
//
// A Membership's methods are safe for concurrent use. New blocks while it
// joins Config.Join (up to Tuning.TCPTimeout per unreachable seed), Join
// likewise; SetLeader and Leave block until their broadcast went out or
// Tuning.BroadcastTimeout (or Leave's ctx deadline) passed; Close waits for
// calls in progress. Resolve, Members, Hints and Dropped never block on the
// network. The slice Members returns is the caller's.
//
// The package starts no goroutines of its own but one per conflict check
// (below); memberlist starts its own and stops them in Close, which waits
// for the checks too. Its event callbacks update the member table and
// enqueue hints without ever waiting for the reader: when the Hints
// channel is full the oldest hint is dropped (counted by Dropped). Close
// closes the Hints channel, so a reader ranging over it ends there.
//
// # Two processes with one node ID
//
// memberlist keeps the first address it learned for a name and only logs
// "Conflicting address" for another, so a second process started with a
// live node's ID would run beside it. This package checks every conflict
// on this node's own name (conflict.go): a memberlist ping addressed to
// the name at the other address is answered only by a live memberlist of
// that name. Seen while New joins and answered, New fails with
// ErrDuplicateNodeID; seen later and answered, the node logs it at Error
// and counts it (Conflicts). Unanswered, it is this node's own earlier run
// on another address, still listed until gossip declares it dead (a
// restart on a new port or IP), and only logged at Debug.
//
// # Logging
//
// memberlist's lines go to the "memberlist" sub-logger at the level they
// name, except two that are expected: errors about its own closed sockets
// once Close has begun (a clean shutdown logs no error), and its
// "Conflicting address" line (the check above says what it meant), both
// at Debug. A node whose seeds are not up yet (the first node of a
// cluster) says so in one line at Info.
//
// # Errors
//
// New and Validate return a *ConfigError naming the bad Config field,
// wrapping ErrInvalidConfig (and ErrMetaTooLarge when the metadata would
// not fit); New returns ErrDuplicateNodeID when another live process uses
// the node ID. Join wraps ErrJoin when no seed could be joined; SetLeader
// returns ErrMetaTooLarge (nothing changed) or ErrBroadcastTimeout (the
// change spreads anyway); SetLeader, Join and Leave return ErrClosed after
// Close (SetLeader and Join also after Leave). ErrBadMeta is what
// undecodable metadata of another member is logged with.
//
// See docs/protocol.md R30 (section 3.4) for what a hint may change,
// docs/architecture.md (sections 2 and 5) for the package's place, and
// docs/security.md R48 for the gossip key.
package membership
