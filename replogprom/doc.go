// Package replogprom exports a replog node's metrics to Prometheus: a
// prometheus.Collector that reads replog.Log.Stats at every scrape (of
// one Log, or of every log of a replog.Node).
//
// It is a package of its own so that a program that does not import it
// does not link the Prometheus client: replog itself keeps its counters
// without it (see replog.Stats), and any other exporter can read them the
// same way.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(replogprom.NewCollector(log))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Every metric carries two constant labels: node, the node's ID, and
// log, a name for the Log within the process (CollectorOptions.Log,
// empty by default, which Prometheus stores as no label). The
// collectors of several Logs of one process share a registry as long as
// no two have the same node and log: nodes of a test cluster or the
// benchmark differ by node as they are, a service that opens two Logs
// with one node ID names each with NewCollectorWith:
//
//	orders, _ := replogprom.NewCollectorWith(ordersLog, replogprom.CollectorOptions{Log: "orders"})
//	payments, _ := replogprom.NewCollectorWith(paymentsLog, replogprom.CollectorOptions{Log: "payments"})
//	reg.MustRegister(orders, payments)
//
// A second collector with the same node and log is refused
// (prometheus.AlreadyRegisteredError, "duplicate metrics collector
// registration attempted"). The log label is on every series, empty or
// not, because a registry refuses two descriptors of one name with
// different label names.
//
// # Many logs: a Node
//
// A replog.Node hosts many named logs (docs/logs.md). NewNodeCollector
// exports all of them with one collector: at every scrape, every log open
// on the node, its series labelled log with the log's name, the default
// log's with log="" (its series are the same as a Collector of it sends,
// so dashboards and alerts made for one Log keep working), plus the
// Node's own replog_node_open_logs, replog_node_unknown_log_messages_total,
// replog_node_inbox_full_drops_total and its contact with its peers
// (docs/protocol.md R98-R100): replog_node_fetches_sent_total,
// replog_node_heartbeats_sent_total, replog_node_heartbeats_received_total,
// replog_node_contact_resyncs_total and replog_node_peers_silent_total
// (labelled node only):
//
//	reg.MustRegister(replogprom.NewNodeCollector(node))
//
// A log created appears at the next scrape and a deleted one vanishes
// with no registration. Register a NodeCollector instead of, not beside,
// a Collector of the node's default log or of its named logs: the same
// series twice fail the registry's Gather. Sum or group by log to see a
// node, by node to see a log: sum by (node) (rate(replog_appends_total[1m]))
// is a node's write rate over all its logs, and count by (node)
// (replog_role{role="leader"} == 1) how many logs each node leads. A
// named log runs on its replicas only, so its series come from those
// nodes. With many logs, each log adds every series above: about 40 per
// log and node, plus one per follower on its leader.
//
// Names follow Prometheus' conventions: the replog_ prefix, base units
// (seconds, bytes), _total on counters.
//
// Gauges of the node's state: replog_log_end_offset,
// replog_durable_log_end_offset, replog_high_watermark,
// replog_readable_high_watermark, replog_log_start_offset, replog_epoch,
// replog_role{role} (1 for the node's role, 0 for the others),
// replog_has_leader (1 while the node knows a leader),
// replog_storage_size_bytes (the data directory's files), and
// replog_uncommitted_bytes (the leader's uncommitted backlog, bounded by
// Options.MaxUncommittedBytes).
//
// Counters since the node opened: replog_leader_changes_total,
// replog_elections_started_total, replog_appends_total and
// replog_append_bytes_total (records committed through this node's
// Append calls), replog_forwarded_appends_sent_total and
// replog_forwarded_appends_received_total, replog_fetches_served_total,
// the replication quota's replog_catch_up_throttled_fetches_total,
// replog_catch_up_throttled_seconds_total and replog_catch_up_bytes_total
// (Options.CatchUpBytesPerSecond), replog_backlog_refusals_total (appends
// the leader refused for a full backlog, each retried),
// replog_other_log_messages_total (messages naming another log, dropped by
// a log run with Open), replog_quiescent_fetches_sent_total and
// replog_quiescent_fetches_parked_total (R99), the data
// directory's replog_storage_fsyncs_total,
// replog_storage_bolt_commits_total, replog_storage_group_commits_total
// (commit journal records), replog_storage_journal_batches_total,
// replog_storage_journal_bytes_total, replog_storage_journal_waits_total
// (batches that waited for a checkpoint to make room in the journal),
// replog_storage_checkpoints_total and
// replog_storage_checkpoint_seconds_total, and replog_errors_total{kind} (every kind of replog.Stats.Errors, zero
// or not, so that rate() works from the first scrape).
//
// Histograms: replog_commit_duration_seconds (an append from the node's
// event loop to its commit), replog_fetch_wait_seconds (how long a fetch
// waited at this node before its answer; parked fetches wait up to
// FetchMaxWait), replog_storage_commit_duration_seconds (one write made
// durable: a bbolt transaction and its fsyncs).
//
// On the leader only, per other voter: replog_follower_lag_entries{follower}
// (the leader's LEO minus the follower's) and
// replog_follower_lag_seconds{follower} (how long the follower has not
// been caught up; see replog.FollowerStats). They vanish when the node
// stops leading.
//
// Alerts one might start from: no leader for a while
// (max_over_time(replog_has_leader[1m]) == 0 on a majority of nodes), a
// follower behind (replog_follower_lag_seconds > 10), slow disks
// (histogram_quantile(0.99, rate(replog_storage_commit_duration_seconds_bucket[5m]))),
// errors (rate(replog_errors_total[5m]) > 0, by kind).
package replogprom
