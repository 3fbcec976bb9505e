package replog

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// listenLoopback binds a loopback listener on a port the kernel picks.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestClusterOnListeners: nodes opened with listeners bound beforehand
// know each other's addresses from the start (static Peers, no gossip, no
// free-port guess), advertise the listeners' addresses, replicate, and
// close the listeners at Close.
func TestClusterOnListeners(t *testing.T) {
	voters := []string{"n1", "n2", "n3"}
	lns, peers := map[string]net.Listener{}, map[string]string{}
	for _, id := range voters {
		lns[id] = listenLoopback(t)
		peers[id] = lns[id].Addr().String()
	}
	// The directories come first: cleanups run last first, so the nodes
	// close before their directories are removed.
	dirs := map[string]string{}
	for _, id := range voters {
		dirs[id] = t.TempDir()
	}
	c := &testCluster{t: t, opts: map[string]Options{}, nodes: map[string]*Log{}}
	t.Cleanup(c.closeAll)
	for _, id := range voters {
		o := testOptions(dirs[id], id, voters)
		o.GossipAddr, o.RPCAddr, o.Listener, o.Peers = "", "", lns[id], peers
		l := c.start(id, o)
		if got := l.Status().RPCAddr; got != peers[id] {
			t.Fatalf("%s advertises %s, want its listener's %s", id, got, peers[id])
		}
	}
	lead := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	off, err := c.nodes[lead].Append(ctx, []byte("on listeners"))
	if err != nil {
		t.Fatal(err)
	}
	for id, l := range c.nodes {
		for e, err := range l.ReadRange(ctx, off, off+1) {
			if err != nil || string(e.Data) != "on listeners" {
				t.Fatalf("%s: %q, %v", id, e.Data, err)
			}
		}
	}
	l := c.nodes["n1"]
	delete(c.nodes, "n1")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := lns["n1"].Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("n1's listener after Close: Accept = %v, want net.ErrClosed", err)
	}
}

// TestListenerOptions: RPCAddr naming another address than Listener's is
// refused, naming RPCAddr; a failed Open closes the listener (Open owns
// it); AdvertiseRPCAddr, when set, is advertised instead of its address.
func TestListenerOptions(t *testing.T) {
	ln := listenLoopback(t)
	o := Options{Dir: t.TempDir(), Listener: ln, RPCAddr: "127.0.0.1:0", Secret: testSecret}
	if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "RPCAddr") {
		t.Fatalf("Validate with RPCAddr other than Listener's = %v, want ErrInvalidOptions naming RPCAddr", err)
	}
	o.RPCAddr = ln.Addr().String()
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with RPCAddr = Listener's address: %v", err)
	}
	// A networked node: a listener is a network, so credentials are needed.
	o.RPCAddr, o.Secret = "", nil
	if _, err := Open(o); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Secret") {
		t.Fatalf("Open with a Listener and no credentials = %v, want ErrInvalidOptions naming Secret", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("listener after a failed Open: Accept = %v, want net.ErrClosed", err)
	}

	ln = listenLoopback(t)
	l, err := Open(Options{Dir: t.TempDir(), Listener: ln, AdvertiseRPCAddr: "replog-1.example:7400", Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Status().RPCAddr; got != "replog-1.example:7400" {
		t.Fatalf("advertised %s, want AdvertiseRPCAddr", got)
	}
}
