package hostile

import (
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/transport"
)

// The few places that name the hardened API (Options.Secret,
// Options.Insecure, AppendRequest.Epoch, TCPConfig.Secret). Keeping them
// here lets the same suite be run against the code before the hardening
// (with a copy of this file that leaves them out) to see each test fail.

// applySecurity sets o up for sec.
func applySecurity(o *replog.Options, sec security) {
	if sec.secret != nil {
		o.Secret = append([]byte(nil), sec.secret...)
		return
	}
	o.Insecure = true
}

// appendRequest is a forwarded append as a follower of the leader of epoch
// would send it.
func appendRequest(id, epoch uint64, records ...[]byte) *protocol.AppendRequest {
	return &protocol.AppendRequest{RequestID: id, Epoch: epoch, Records: records}
}

// withTransportSecret sets the secret of a transport config.
func withTransportSecret(c *transport.TCPConfig, secret []byte) {
	c.Secret = secret
}

// withIdleTimeout sets a transport's idle deadline.
func withIdleTimeout(c *transport.TCPConfig, d time.Duration) {
	c.IdleTimeout = d
}

// The transport's default limits a Log runs with.
const (
	defaultMaxConnsPerIP      = transport.DefaultMaxInboundConnsPerIP
	defaultMaxConns           = transport.DefaultMaxInboundConns
	defaultPartialFrameBudget = transport.DefaultPartialFrameBudget
)
