// Package protocol is replog's vocabulary: the messages replicas exchange
// (Message and its bodies: fetch, vote, begin-epoch and forwarded append,
// with their outcome codes; each message names the log it belongs to,
// whose name ValidLogName defines), the log's entries (Entry, EntryType), the rows
// of the leader-epoch map (EpochStart), a replica's durable election state
// (QuorumState), the byte accounting every budget shares (EntryOverhead,
// Budget), and the binary encoding of a message (AppendMessage,
// DecodeMessage, EncodedSize).
//
// Everyone else speaks it: the protocol core (replica, fetcher) consumes
// and produces these values, transport frames an encoded message on a
// connection (a length prefix and a checksum around AppendMessage's bytes)
// and delivers decoded ones, storage stores entries, epoch rows and quorum
// states, and the simulation and the root package move them between the
// others. None of them needs another of them for its types.
//
// Messages are one-way: a fetch response is a message like any other, tied
// to its request by FetchID. That keeps the protocol core free of blocking
// calls, and a fetch parked at the leader never holds up a vote or an
// append between the same two nodes.
//
// This package is a leaf: it imports the standard library only, and must
// never import another package of replog (nor bbolt, net or crypto/tls), so
// that importing the vocabulary never links a store or a socket. It holds
// no state, starts no goroutines and does no I/O.
package protocol
