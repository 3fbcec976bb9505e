// Package testpki makes throwaway certificate authorities and node
// certificates for TLS tests (ECDSA P-256, valid for 127.0.0.1 and
// localhost, as server and as client). Test code only.
//
// It owns nothing durable: every key is generated in memory by New or
// Issue and dies with the test; nothing is written to disk, and no
// certificate outlives a day. Being internal, it can be imported only
// inside replog's module, and only test files may import it (today the
// root package's TLS tests and transport's): its keys are for loopback
// tests, never for a running node. It imports nothing of replog's.
//
// Use: ca := testpki.New(t, "ca") makes a CA, ca.Issue(t, "n1") a node
// certificate whose names are n1, localhost and 127.0.0.1 (so
// transport.VerifyCertNamesNode accepts it for node n1), and
// ca.MutualTLS(t, "n1", ca.Pool) a *tls.Config that presents it and
// requires and verifies the peer's certificate against the given pool,
// both when accepting and when dialling (TLS 1.3). A second CA makes a
// rogue node for refusal tests.
//
// Every function takes the test's testing.TB and fails it (t.Fatal) on
// error, so call it from the test's own goroutine; what it returns is the
// caller's. A CA is never modified after New, and its Pool may be shared
// by every node of a test.
//
// See docs/security.md (R48: mutual TLS as the alternative to a
// cluster secret).
package testpki
