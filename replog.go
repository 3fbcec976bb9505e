package replog

import (
	"context"
	"iter"

	"github.com/replog-io/replog/replica"
)

// Entry is a committed record as readers see it.
type Entry struct {
	// Offset is the entry's position in the log.
	Offset uint64
	// Epoch is the leader epoch that appended it.
	Epoch uint64
	// Data is the record; the caller owns it.
	Data []byte
}

// Role is a node's role (leader, follower, ...).
type Role = replica.Role

// Status is a snapshot of a node's replication state.
type Status struct {
	NodeID string `json:"node_id"`
	// Role is "leader", "follower", "prospective", "candidate" or
	// "observer".
	Role     string `json:"role"`
	Epoch    uint64 `json:"epoch"`
	LeaderID string `json:"leader_id"`
	// Voters is the configured voter list.
	Voters []string `json:"voters"`
	// LEO is the log end offset (written or being written); HW the high
	// watermark: offsets below it are committed and readable.
	LEO           uint64 `json:"leo"`
	DurableLEO    uint64 `json:"durable_leo"`
	HighWatermark uint64 `json:"hw"`
	LogStart      uint64 `json:"log_start"`
	// RemoteLEO is, on the leader, each other voter's LEO as the leader
	// knows it; nil on other nodes.
	RemoteLEO map[string]uint64 `json:"remote_leo,omitempty"`
	// RPCAddr is the transport's bound address ("" for a single node).
	RPCAddr string `json:"rpc_addr"`
	// GossipAddr is memberlist's bound address ("" without gossip).
	GossipAddr string `json:"gossip_addr"`
}

// Log is a handle on this node's replica of the replicated log.
type Log struct{}

// Open opens (or creates) the node's log in opts.Dir and joins the cluster.
func Open(opts Options) (*Log, error) { panic("todo") }

// Append appends data and returns its offset once it is committed.
func (l *Log) Append(ctx context.Context, data []byte) (uint64, error) { panic("todo") }

// AppendBatch appends records as one batch, contiguous, and returns the
// first offset once all are committed.
func (l *Log) AppendBatch(ctx context.Context, records [][]byte) (uint64, error) { panic("todo") }

// Read iterates committed entries from offset from, waiting at the HW for
// more until ctx ends.
func (l *Log) Read(ctx context.Context, from uint64) iter.Seq2[Entry, error] { panic("todo") }

// Status returns a snapshot of the node's state.
func (l *Log) Status() Status { panic("todo") }

// Close stops the node. Pending appends fail with ErrClosed.
func (l *Log) Close() error { panic("todo") }
