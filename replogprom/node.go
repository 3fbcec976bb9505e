package replogprom

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replog-io/replog"
)

// NodeCollector is a prometheus.Collector for a replog.Node: the series
// of every log open on the node, each labelled with the log's name (the
// default log's label empty, as a Collector of it has it: a dashboard
// made for one Log keeps working), read from each Log's Stats at every
// scrape, and the Node's own counters. Logs created or deleted between
// two scrapes appear or vanish with no registration. Safe for concurrent
// use.
//
// Its series are those a Collector of each log would send (node and log
// constant labels, the same help), so that it shares a registry with
// Collectors of other Logs. Which logs a node holds is known only at a
// scrape, so Describe sends no descriptor: the NodeCollector is an
// unchecked collector, whose series the registry checks at Gather (a
// series sent twice fails the Gather) rather than at Register.
type NodeCollector struct {
	node   *replog.Node
	nodeID string

	mu   sync.Mutex
	logs map[string]*metrics // by log name, the default log's "" included

	openLogs, unknownLogMessages, inboxFullDrops                                 *prometheus.Desc
	fetchesSent, heartbeatsSent, heartbeatsReceived, contactResyncs, peersSilent *prometheus.Desc
}

var _ prometheus.Collector = (*NodeCollector)(nil)

// NewNodeCollector returns a NodeCollector of n's logs, labelled with
// the node's ID. Register it once per Node, instead of (not beside) a
// Collector of its default log, whose series it includes: the two would
// send the same series and the registry's Gather would fail (as would
// two NodeCollectors of one node). Nodes with different IDs, and Logs
// with other node IDs or log labels, share a registry.
func NewNodeCollector(n *replog.Node) *NodeCollector {
	id := n.Default().Status().NodeID
	labels := prometheus.Labels{"node": id}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("replog_node_"+name, help, nil, labels)
	}
	return &NodeCollector{
		node:   n,
		nodeID: id,
		logs:   map[string]*metrics{},

		openLogs:           d("open_logs", "Named logs open on this node."),
		unknownLogMessages: d("unknown_log_messages_total", "Messages received for a log not open on this node (not created here yet, deleted, another incarnation), dropped."),
		inboxFullDrops:     d("inbox_full_drops_total", "Messages, lost peers and hints dropped because their log's inbox was full."),
		fetchesSent:        d("fetches_sent_total", "Fetch requests this node sent, every log's."),
		heartbeatsSent:     d("heartbeats_sent_total", "Heartbeats this node sent to peers it sent nothing else to for FetchMaxWait."),
		heartbeatsReceived: d("heartbeats_received_total", "Heartbeats this node received."),
		contactResyncs:     d("contact_resyncs_total", "Resyncs with a peer after a lost quiescent fetch or answer."),
		peersSilent:        d("peers_silent_total", "Times a peer sent this node nothing for FetchTimeout."),
	}
}

// Describe sends nothing: see NodeCollector.
func (c *NodeCollector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the Stats of the default log and of every named log
// open on the node, and the Node's Stats, and sends their metrics. A log
// closed between the listing and its Stats is left out of this scrape.
func (c *NodeCollector) Collect(ch chan<- prometheus.Metric) {
	logs := map[string]*replog.Log{"": c.node.Default()}
	for _, li := range c.node.Logs() {
		if !li.Open {
			continue
		}
		if l, err := c.node.Log(li.Name); err == nil {
			logs[li.Name] = l
		}
	}
	c.mu.Lock()
	for name := range c.logs {
		if logs[name] == nil {
			delete(c.logs, name) // deleted: its descriptors go too
		}
	}
	ms := make(map[string]*metrics, len(logs))
	for name := range logs {
		m := c.logs[name]
		if m == nil {
			m = newMetrics(prometheus.Labels{"node": c.nodeID, "log": name})
			c.logs[name] = m
		}
		ms[name] = m
	}
	c.mu.Unlock()
	for name, l := range logs {
		ms[name].collect(ch, l.Stats())
	}
	s := c.node.Stats()
	ch <- prometheus.MustNewConstMetric(c.openLogs, prometheus.GaugeValue, float64(s.OpenLogs))
	ch <- prometheus.MustNewConstMetric(c.unknownLogMessages, prometheus.CounterValue, float64(s.UnknownLogMessages))
	ch <- prometheus.MustNewConstMetric(c.inboxFullDrops, prometheus.CounterValue, float64(s.InboxFullDrops))
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.fetchesSent, s.FetchesSent}, {c.heartbeatsSent, s.HeartbeatsSent}, {c.heartbeatsReceived, s.HeartbeatsReceived},
		{c.contactResyncs, s.ContactResyncs}, {c.peersSilent, s.PeersSilent}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}
