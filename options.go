package replog

import (
	"crypto/tls"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options configures a Log. The zero value plus Dir is a working
// single-node log. Open never modifies the caller's Options.
type Options struct {
	// Dir holds the node's bbolt file (replog.db). Required.
	Dir string
	// NodeID names this node; unique in the cluster. Default "node1".
	NodeID string
	// ClusterID must match on every node; connections from another cluster
	// are refused. Default "replog".
	ClusterID string
	// Voters lists the voter node IDs (fixed). A node not in the list is an
	// observer. Default: just NodeID (a single-node cluster).
	Voters []string

	// RPCAddr is the TCP address the replication transport listens on.
	// Default "127.0.0.1:0" (any free port) when the cluster has more than
	// one node; unused for a single voter with no peers.
	RPCAddr string
	// AdvertiseRPCAddr is the address other nodes dial. Default: the bound
	// RPCAddr.
	AdvertiseRPCAddr string
	// Peers maps node IDs to RPC addresses statically. Addresses learned by
	// gossip are used for IDs not listed here.
	Peers map[string]string
	// TLS, if set, secures the transport. It is used both to serve (set
	// Certificates, and ClientCAs with ClientAuth for mutual TLS) and to
	// dial (RootCAs). Nil means plain TCP.
	TLS *tls.Config

	// GossipAddr is the memberlist bind address ("host:port"). Empty
	// disables gossip (use Peers). Default "".
	GossipAddr string
	// Join lists gossip addresses of existing members to join at Open.
	Join []string
	// GossipKey, if set, encrypts gossip (16, 24 or 32 bytes).
	GossipKey []byte
	// GossipLabel, if set, is memberlist's label: gossip from nodes with
	// another label is refused. Default: ClusterID.
	GossipLabel string

	// FetchMaxWait is how long the leader parks an empty fetch (Kafka's
	// replica.fetch.wait.max.ms). Default 500ms.
	FetchMaxWait time.Duration
	// FetchTimeout: a voter that has not fetched successfully for this
	// long starts an election; a leader without fetches from a majority for
	// this long resigns. Default 2s. Must exceed FetchMaxWait.
	FetchTimeout time.Duration
	// ElectionTimeout is the base of randomised election timeouts.
	// Default 500ms.
	ElectionTimeout time.Duration
	// FetchMaxBytes bounds one fetch response's entry bytes. Default 1 MiB.
	FetchMaxBytes int
	// MaxRecordSize bounds one appended record. Default 1 MiB.
	MaxRecordSize int

	// NoSync disables fsync. Acknowledged appends can then be lost on a
	// machine crash (not on a process crash). For tests only.
	NoSync bool
	// Logger receives logs; components get Named sub-loggers. Default: a
	// null logger.
	Logger hclog.Logger
}
