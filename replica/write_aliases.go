package replica

import "github.com/replog-io/replog/protocol"

// The core's write vocabulary moved to package protocol (protocol.Write,
// protocol.WriteKind and its constants); Ready.Writes is a []protocol.Write.
//
// temporary: these aliases keep package simulation compiling until its
// owner names protocol's types (disk.go, sim.go, trace.go); nothing else
// may use them. Not marked "Deprecated:" on purpose: staticcheck (SA1019,
// run on ./... in CI) would then fail simulation until it switches.

// Write is a temporary alias of protocol.Write: name that instead.
type Write = protocol.Write

// WriteKind is a temporary alias of protocol.WriteKind: name that instead.
type WriteKind = protocol.WriteKind

// Temporary aliases of the constants of the same names in package
// protocol: name those instead.
const (
	WriteAppend       = protocol.WriteAppend
	WriteTruncate     = protocol.WriteTruncate
	WriteQuorumState  = protocol.WriteQuorumState
	WriteHWCheckpoint = protocol.WriteHWCheckpoint
)
