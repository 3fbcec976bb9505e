package transport

import (
	"errors"
	"net"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// listen binds a loopback listener on a port the kernel picks.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestTCPServesAGivenListener: transports given listeners bound before
// they start know each other's addresses from the start (no free-port
// guess), serve on them, and close them at Close.
func TestTCPServesAGivenListener(t *testing.T) {
	lnA, lnB := listen(t), listen(t)
	addrs := map[string]string{"a": lnA.Addr().String(), "b": lnB.Addr().String()}
	res := func(id string) (string, bool) { a, ok := addrs[id]; return a, ok }
	a, err := NewTCP(TCPConfig{NodeID: "a", ClusterID: "c", Listener: lnA, Resolver: res, Secret: testSecret, Logger: testLogger(t, "a")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// ListenAddr may name the listener's own address.
	b, err := NewTCP(TCPConfig{NodeID: "b", ClusterID: "c", Listener: lnB, ListenAddr: addrs["b"], Resolver: res, Secret: testSecret, Logger: testLogger(t, "b")})
	if err != nil {
		t.Fatal(err)
	}
	if a.Addr() != addrs["a"] || b.Addr() != addrs["b"] {
		t.Fatalf("Addr() = %s, %s; want the listeners' %s, %s", a.Addr(), b.Addr(), addrs["a"], addrs["b"])
	}
	eventually(t, "a's vote request reaches b", func() bool {
		_ = a.Send(protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "a"}})
		select {
		case m := <-b.Receive():
			return m.From == "a"
		default:
			return false
		}
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := lnB.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("b's listener after Close: Accept = %v, want net.ErrClosed", err)
	}
}

// TestTCPListenerConfig: ListenAddr naming another address than Listener's
// is refused, naming ListenAddr, and the refused listener is closed (the
// transport owns it from NewTCP on); without either, ListenAddr is
// required.
func TestTCPListenerConfig(t *testing.T) {
	res := func(string) (string, bool) { return "", false }
	ln := listen(t)
	_, err := NewTCP(TCPConfig{NodeID: "a", Listener: ln, ListenAddr: "127.0.0.1:0", Resolver: res})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "ListenAddr" || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewTCP with another ListenAddr than Listener's = %v, want a ConfigError on ListenAddr", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("listener after a refused NewTCP: Accept = %v, want net.ErrClosed", err)
	}
	if err := (TCPConfig{NodeID: "a", Resolver: res}).Validate(); !errors.As(err, &ce) || ce.Field != "ListenAddr" {
		t.Fatalf("neither ListenAddr nor Listener: %v, want a ConfigError on ListenAddr", err)
	}
	ln = listen(t)
	defer ln.Close()
	if err := (TCPConfig{NodeID: "a", Listener: ln, Resolver: res}).Validate(); err != nil {
		t.Fatalf("Listener without ListenAddr: %v", err)
	}
}
