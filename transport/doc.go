// Package transport carries replog's protocol messages (package protocol)
// between nodes: it frames each encoded message on a connection (a length
// prefix and a CRC-32C around protocol.AppendMessage's bytes; AppendFrame,
// DecodeFrame, Reader), runs the TCP (and TLS) transport with its handshake,
// and offers an in-memory network with the same interface for tests.
//
// Given a cluster secret (TCPConfig.Secret), the TCP transport
// authenticates both ends of every connection with a challenge-response
// handshake that tells a peer without the secret nothing about the
// cluster; every message it delivers carries the node ID its connection
// authenticated as. It also bounds what any peer can cost a node:
// inbound connections (in total and per address), idle time, and the
// memory of partly received frames. See TCP and TCPConfig.
//
// transport imports protocol for the messages and nothing else of replog's
// (not storage, not the core).
package transport
