package hostile

import (
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/protocol"
)

// TestMessageOfAnotherLogIsNotTaken: a node running its log with Open
// reads the transport directly, with no router; a message naming another
// log (a Node's named log, docs/logs.md) must not be stepped into its
// log. A voter's forwarded append named for log "x.1" is dropped and
// counted; the same append for the default log, sent right after it on
// the same connection (the positive control), lands.
func TestMessageOfAnotherLogIsNotTaken(t *testing.T) {
	c := newCluster(t, 3, insecureMode, nil)
	lead, epoch := c.leader()
	as := c.otherThan(lead)
	l := c.nodes[lead]
	tr := impostorTransport(t, as, lead, l.Status().RPCAddr, nil)
	defer tr.Close()
	before := l.Stats().OtherLogMessages
	for _, m := range []protocol.Message{
		{From: as, To: lead, Log: "x.1", Body: appendRequest(1, epoch, []byte("NAMED-FOR-ANOTHER-LOG"))},
		{From: as, To: lead, Body: appendRequest(2, epoch, []byte("CONTROL-AFTER-NAMED"))},
	} {
		if err := tr.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	testwait.WaitFor(t, "the control append in the leader's log", 10*time.Second, func() bool {
		for _, e := range readAll(t, l, lead) {
			if string(e.Data) == "CONTROL-AFTER-NAMED" {
				return true
			}
		}
		return false
	})
	testwait.WaitFor(t, "the named message counted", 10*time.Second, func() bool {
		return l.Stats().OtherLogMessages > before
	})
	for _, e := range readAll(t, l, lead) {
		if string(e.Data) == "NAMED-FOR-ANOTHER-LOG" {
			t.Fatalf("the leader appended a message of log x.1 to its own log at offset %d", e.Offset)
		}
	}
	c.sameLeadership(lead, epoch)
}
