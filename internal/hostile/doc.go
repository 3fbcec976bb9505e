// Package hostile holds replog's hostile-peer test suite: attacks on real
// replog nodes, run in-process and reached only the way an outsider reaches
// them, through their sockets (transport and gossip ports on 127.0.0.1) and
// their data directories.
//
// Each test reproduces one attack the trust rules (R42–R48) answer and
// asserts the defence: a forged gossip leader, a diverging answer below the
// high watermark, an impersonated follower, an absurd epoch, a single
// message that would depose the leader, an append from an unknown node,
// partly sent frames that would exhaust memory, idle connections, damaged
// data files, and handshake refusals that would reveal the cluster. The
// attack tooling (a raw protocol client and a fake node built on the
// transport package's exported codec, a gossip member with forged metadata)
// lives in the test files; the package has no API.
//
// Run it with go test -race ./internal/hostile. Nothing here listens on anything but
// loopback.
package hostile
