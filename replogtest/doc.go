// Package replogtest runs a replog cluster inside a test, in one call, for
// the tests of a service that embeds replog (hashicorp/raft's
// MakeCluster, for replog):
//
//	c := replogtest.NewCluster(t, 3)
//	lead := c.Leader()             // waits for the first election
//	off, err := lead.Append(ctx, []byte("order-1"))
//	c.Kill(c.WaitLeader())         // a crash: no handover, no goodbye
//	lead = c.Leader()              // the survivors elect another
//
// Each node is a replog.Log opened in this process on a t.TempDir
// directory, with fast protocol timings, a random Secret, no gossip and
// static Peers. A node reaches each other node through a link: a loopback
// proxy the Cluster listens on before any node opens (so no port is
// guessed, and none can be taken meanwhile), which it can hold or cut.
// That is how it injects faults without anything in replog's API for
// them:
//
//   - Kill cuts the node's links, then closes its Log: the others see its
//     connections drop and nothing more, as when its process dies; Restart
//     opens it again on its directory.
//   - Stop closes it gracefully (a leader hands over first).
//   - Pause holds every byte to and from the node until Resume, as for a
//     stopped process (but the node's own timers keep running).
//   - Partition cuts the links between some nodes and the rest until Heal.
//
// Configure adjusts each node's replog.Options (NoSync off, a Logger, a
// ManualVoterChanges, ...). t.Cleanup stops every node and link and waits
// for their goroutines: a test that uses go.uber.org/goleak sees none
// left.
//
// NewNode opens a single replog.Node with named logs and their records
// already committed, for the tests of code that serves many logs
// (handlers, metrics, tools) and needs no faults.
//
// The fault tests of replog itself (SIGKILL, SIGSTOP of real processes)
// live in the module's internal packages; this package is for the tests
// of code that uses replog.
package replogtest
