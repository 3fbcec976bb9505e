package replog

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// memberlist's Shutdown stops its probe scheduler but does not wait
		// for a probe already running: probeNode ends on its own within
		// its probe timeout (it waits for an ack from a peer that is gone).
		// It is the library's goroutine, started and ended by it, not one
		// of ours left behind by Close; every goroutine of ours is still
		// checked. (CI saw it once after the gossip examples.)
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
	)
}
