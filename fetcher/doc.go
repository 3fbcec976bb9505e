// Package fetcher holds the follower side of replog's pull replication: it
// builds fetch requests from the follower's log view and turns fetch
// responses into decisions (append these entries, truncate to this offset,
// adopt this epoch or leader, retry elsewhere, drop).
//
// It is pure: no I/O, no clock (callers pass the time), no goroutines, no
// randomness (the first fetch ID is the caller's). The protocol core
// (package replica) owns a Fetcher per replica, drives it from its one
// goroutine and carries out its decisions; nothing else touches it. The
// decisions follow docs/protocol.md §3.3 (the follower side of the fetch) and
// KIP-101/KIP-279: truncation follows the leader's epoch history, never the
// local HW.
//
// A follower has at most one fetch outstanding (R10): Build makes a request the
// outstanding one, and Handle takes only the answer to it (by FetchID and
// responder), so a late, repeated or forged answer decides nothing. After
// TimeOut the fetch is due for a retry but its answer is still taken until
// the next Build; Cancel forgets it. BuildContact makes a contact fetch
// (R77), from the follower's durable end while its writer holds its next
// fetch: its answer is leader contact and an HW up to that offset, never
// entries to append.
//
// Log is the read-only view of the follower's log the fetcher needs; the
// core passes its own view (durable entries plus the tail being written).
package fetcher
