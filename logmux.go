package replog

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/transport"
)

// inboxSize bounds the messages waiting for one log's loop. The mux
// never waits for a log (one slow log must not hold up the others on the
// shared connection): what does not fit is dropped and counted, as the
// network may drop it (the protocol retries).
//
// Only inboxChan of them wait in the channel the loop reads; the rest
// wait in the inbox's backlog, which grows only while the log's loop is
// behind and is fed to the channel by a goroutine that runs only then.
// An idle log (a few messages a second) so costs a channel of inboxChan
// messages (4 KiB), not of inboxSize (64 KiB), and a busy one keeps the
// room it needs. Lost peers and gossip hints come a few at a time (one
// per peer or member event for every log), so inboxEvents of each is
// ample; beyond it they are dropped as messages are (each only hastens
// what the log's timers do anyway). Silent peers and resyncs are not
// messages: a quiesced follower waits for them, so they are never
// dropped, and wait in a set of peers (contactReports), not a channel.
const (
	inboxSize   = 1024
	inboxChan   = 64
	inboxEvents = 64
)

// logMux is a Node's router: one goroutine reads the shared transport's
// messages and lost peers and gossip's hints and hands each to the logs
// it is for: a message to its log by protocol.Message.Log (a name no open
// log has: dropped, counted), a lost peer and a failed node to every log,
// a leader claim to the default log only (gossip's claims are the default
// log's), a joined member to every log that has it among its replicas.
type logMux struct {
	tcp    *transport.TCP         // nil on a single node
	ml     *membership.Membership // nil without gossip
	logger hclog.Logger
	// joined, if not nil, is told of each member gossip says joined or
	// came back, on the router goroutine (the Node's balancer, R107).
	joined func(node string)

	mu     sync.RWMutex
	routes map[string]*inbox

	// dropped counts messages for a log not open here and messages a
	// full inbox could not take.
	unknown, full atomic.Uint64

	// sched wakes every log's loop at its deadlines (R97): one goroutine
	// and one timer for the node's logs.
	sched *deadlines

	stop chan struct{}
	done chan struct{}
	// feeders counts the inboxes' feed goroutines (inbox.feed), which
	// close waits for.
	feeders sync.WaitGroup
}

// inbox is one log's share of the mux: the channels its loop reads.
type inbox struct {
	name  string // what its messages carry as Log (wireLogName; "" for the default log)
	recv  chan protocol.Message
	down  chan string
	hints chan membership.Hint
	// reports are the node's contact reports (R99, R100) the log's loop
	// has not taken yet.
	reports *contactReports
	// replicas are the log's voters at creation (nil: every node, the
	// default log): the members whose joining the log's core hears of.
	replicas map[string]bool

	// mu guards backlog and feeding. backlog holds, in order, the
	// messages that found recv full (at most inboxSize-inboxChan); while
	// it is not empty a feed goroutine moves them into recv and route
	// appends behind them, so that the log reads its messages in the
	// order they came. gone is closed when the inbox is removed.
	mu      sync.Mutex
	backlog []protocol.Message
	feeding bool
	gone    chan struct{}
	goneOne sync.Once
}

func newLogMux(tcp *transport.TCP, ml *membership.Membership, logger hclog.Logger, joined func(node string)) *logMux {
	m := &logMux{tcp: tcp, ml: ml, logger: logger, joined: joined, routes: map[string]*inbox{}, sched: newDeadlines(), stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

// add registers log name's inbox (replicas as inbox.replicas) and
// returns the network parts its Log runs on.
func (m *logMux) add(name string, replicas []string) (netParts, *inbox) {
	in := &inbox{
		name:  name,
		recv:  make(chan protocol.Message, inboxChan),
		down:  make(chan string, inboxEvents),
		hints: make(chan membership.Hint, inboxEvents),
		// A silence is reported once until the peer is heard from again,
		// and a quiesced follower waits for it (R99): never dropped.
		reports: newContactReports(),
		gone:    make(chan struct{}),
	}
	if replicas != nil {
		in.replicas = make(map[string]bool, len(replicas))
		for _, r := range replicas {
			in.replicas[r] = true
		}
	}
	m.mu.Lock()
	m.routes[name] = in
	m.mu.Unlock()
	np := netParts{tcp: m.tcp, ml: m.ml, down: in.down, reports: in.reports, advertise: name == "", wire: name, sched: m.sched}
	if m.tcp != nil {
		np.tr = &logView{mux: m, in: in}
	}
	if m.ml != nil {
		np.hints = in.hints
	}
	return np, in
}

// remove unregisters in (if it is still the route of its name) and
// stops its feed goroutine, if one runs.
func (m *logMux) remove(in *inbox) {
	m.mu.Lock()
	if m.routes[in.name] == in {
		delete(m.routes, in.name)
	}
	m.mu.Unlock()
	in.goneOne.Do(func() { close(in.gone) })
}

// close stops the router goroutine, the feed goroutines and the deadline
// scheduler.
func (m *logMux) close() {
	close(m.stop)
	<-m.done
	m.feeders.Wait()
	m.sched.close()
}

func (m *logMux) run() {
	defer close(m.done)
	var recv <-chan protocol.Message
	var down <-chan string
	var hints <-chan membership.Hint
	var silent, resync <-chan string
	if m.tcp != nil {
		recv, down = m.tcp.Receive(), m.tcp.PeerDown()
		silent, resync = m.tcp.Silent(), m.tcp.Resyncs()
	}
	if m.ml != nil {
		hints = m.ml.Hints()
	}
	for {
		select {
		case <-m.stop:
			return
		case msg, ok := <-recv:
			if !ok {
				recv = nil
				continue
			}
			m.route(msg)
		case id, ok := <-down:
			if !ok {
				down = nil
				continue
			}
			m.peerDown(id)
		case id := <-silent:
			m.report(reportSilent, id)
		case id := <-resync:
			m.report(reportResync, id)
		case h, ok := <-hints:
			if !ok {
				hints = nil
				continue
			}
			m.hint(h)
		}
	}
}

// peerDown hands a lost peer to every log.
func (m *logMux) peerDown(id string) {
	m.each(func(in *inbox) {
		select {
		case in.down <- id:
		default:
			m.full.Add(1)
		}
	})
}

// report hands a contact report on peer id to every log (a log with
// nothing quiesced on the peer does nothing with it). It never drops one:
// each log keeps a set of the peers reported (contactReports).
func (m *logMux) report(k contactReport, id string) {
	m.each(func(in *inbox) { in.reports.add(k, id) })
}

// hint hands a gossip hint to the logs it is for: a leader claim to the
// default log, a joined member to the logs it replicates, a failed node
// to every log.
func (m *logMux) hint(h membership.Hint) {
	if h.Kind == membership.MemberJoined && m.joined != nil {
		m.joined(h.Node)
	}
	m.each(func(in *inbox) {
		switch {
		case h.Kind == membership.LeaderClaim && in.name != "":
			return
		case h.Kind == membership.MemberJoined && in.replicas != nil && !in.replicas[h.Node]:
			return
		}
		select {
		case in.hints <- h:
		default:
			m.full.Add(1)
		}
	})
}

// route hands msg to its log's inbox.
func (m *logMux) route(msg protocol.Message) {
	m.mu.RLock()
	in := m.routes[msg.Log]
	m.mu.RUnlock()
	if in == nil {
		if m.unknown.Add(1)%1024 == 1 {
			m.logger.Debug("message for a log not open on this node dropped", "log", msg.Log, "from", msg.From)
		}
		return
	}
	m.deliver(in, msg)
}

// deliver puts msg in in's channel, or behind the backlog (starting the
// feed goroutine) when the channel is full or a backlog waits; a full
// backlog drops it.
func (m *logMux) deliver(in *inbox, msg protocol.Message) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.backlog) == 0 {
		select {
		case in.recv <- msg:
			return
		default:
		}
	}
	if len(in.backlog) >= inboxSize-inboxChan {
		m.full.Add(1)
		if m.tcp != nil {
			m.tcp.LostQuiescent(msg) // R100: the peer relies on it arriving
		}
		return
	}
	in.backlog = append(in.backlog, msg)
	if !in.feeding {
		in.feeding = true
		m.feeders.Add(1)
		go m.feed(in)
	}
}

// feed moves in's backlog into its channel, in order, waiting for the
// log's loop to make room, and ends once the backlog is empty (or the
// inbox or the mux goes away). Only it takes from the backlog.
func (m *logMux) feed(in *inbox) {
	defer m.feeders.Done()
	for {
		in.mu.Lock()
		if len(in.backlog) == 0 {
			in.backlog, in.feeding = nil, false // an idle log keeps no room
			in.mu.Unlock()
			return
		}
		msg := in.backlog[0]
		in.mu.Unlock()
		select {
		case in.recv <- msg:
		case <-in.gone:
			return
		case <-m.stop:
			return
		}
		in.mu.Lock()
		in.backlog[0] = protocol.Message{}
		in.backlog = in.backlog[1:]
		in.mu.Unlock()
	}
}

// each runs f on every inbox.
func (m *logMux) each(f func(*inbox)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, in := range m.routes {
		f(in)
	}
}

// contactReport is the kind of a contact report: a peer that fell
// silent (R99) or one to resync with (R100).
type contactReport uint8

const (
	reportSilent contactReport = iota
	reportResync
)

// contactReports holds the contact reports one log's loop has not taken
// yet: a set of peers per kind, under its mutex, and a wake channel of one
// slot that the loop reads. A quiesced follower waits for these reports,
// so none may be lost, and a set loses none while it stays bounded by
// the number of peers: two reports of the same peer and kind before the
// loop takes them are one (a report is a state, "silent", "resync now",
// not a count; the core checks a silence against the node's contact when
// it steps it). A 1,024-deep channel of each kind cost every log 32 KiB.
type contactReports struct {
	mu     sync.Mutex
	silent []string // in the order reported, each peer once
	resync []string
	wake   chan struct{}
}

func newContactReports() *contactReports {
	return &contactReports{wake: make(chan struct{}, 1)}
}

// add records a report of kind k on peer id and wakes the loop.
func (c *contactReports) add(k contactReport, id string) {
	c.mu.Lock()
	set := &c.silent
	if k == reportResync {
		set = &c.resync
	}
	if !slices.Contains(*set, id) {
		*set = append(*set, id)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake is pending: the loop takes this report with it
	}
}

// take returns the reports recorded since the last take, silences first,
// and empties the sets. The loop calls it when woken.
func (c *contactReports) take() (silent, resync []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	silent, resync = c.silent, c.resync
	c.silent, c.resync = nil, nil
	return silent, resync
}

// logView is one log's transport.Transport on the shared TCP transport:
// Send stamps the log's name on the message, Receive is the log's inbox.
// Close does nothing: the Node closes the transport.
type logView struct {
	mux *logMux
	in  *inbox
}

func (v *logView) Send(msg protocol.Message) error {
	msg.Log = v.in.name
	return v.mux.tcp.Send(msg)
}

func (v *logView) Receive() <-chan protocol.Message { return v.in.recv }

func (v *logView) Close() error { return nil }
