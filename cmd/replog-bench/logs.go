package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/tcplink"
	"github.com/replog-io/replog/replica"
)

// The many-logs modes (-logs, -idle-logs, -create-logs, -restart-logs,
// -failover-logs) run c.nodes replog.Nodes in this process and measure
// named logs: what the Node's shared transport, journal and placement
// cost or save against one log.

// nodeTimeout bounds each wait of the many-logs modes (a log opening on
// every node, a leader, an append).
const nodeTimeout = 60 * time.Second

// nodeCluster is the running Nodes, n1..nN, every one a voter of the
// default log. With links, each node reaches each other node through a
// tcplink.Link, so that kill can stop a node as a killed process looks to
// its peers; without, the nodes dial each other directly (the throughput
// modes: a proxy would add its own copies to what is measured).
type nodeCluster struct {
	cfg    config
	root   string
	ids    []string
	rpc    map[string]string // each node's own RPC address, fixed up front
	secret []byte
	links  map[[2]string]*tcplink.Link // [from, to]; nil without links

	mu    sync.Mutex
	nodes map[string]*replog.Node // nil while down
}

// startNodes opens c.nodes Nodes on ports picked up front, authenticated
// by a random secret.
func startNodes(c config, root string, withLinks bool) (*nodeCluster, error) {
	cl := &nodeCluster{cfg: c, root: root, rpc: map[string]string{}, secret: make([]byte, 32), nodes: map[string]*replog.Node{}}
	if _, err := rand.Read(cl.secret); err != nil {
		return nil, err
	}
	for i := range c.nodes {
		id := fmt.Sprintf("n%d", i+1)
		cl.ids = append(cl.ids, id)
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cl.rpc[id] = addr
	}
	if withLinks {
		cl.links = map[[2]string]*tcplink.Link{}
		for _, a := range cl.ids {
			for _, b := range cl.ids {
				if a == b {
					continue
				}
				l, err := tcplink.New()
				if err != nil {
					cl.close()
					return nil, err
				}
				l.SetTarget(cl.rpc[b])
				cl.links[[2]string{a, b}] = l
			}
		}
	}
	for _, id := range cl.ids {
		if err := cl.open(id); err != nil {
			cl.close()
			return nil, err
		}
	}
	return cl, nil
}

// options are node id's Options: c.options with the node's Peers (the
// links to the others, if any).
func (cl *nodeCluster) options(id string) replog.Options {
	peers := map[string]string{}
	for _, other := range cl.ids {
		switch {
		case other == id:
			peers[id] = cl.rpc[id]
		case cl.links != nil:
			peers[other] = cl.links[[2]string{id, other}].Addr()
		default:
			peers[other] = cl.rpc[other]
		}
	}
	if len(cl.ids) == 1 {
		peers = nil // a node alone runs without a transport
	}
	return cl.cfg.options(filepath.Join(cl.root, id), id, cl.ids, peers, cl.secret)
}

// open opens node id on its directory.
func (cl *nodeCluster) open(id string) error {
	n, err := replog.OpenNode(cl.options(id))
	if err != nil {
		return fmt.Errorf("open node %s: %w", id, err)
	}
	cl.mu.Lock()
	cl.nodes[id] = n
	cl.mu.Unlock()
	return nil
}

// node returns node id, nil while it is down.
func (cl *nodeCluster) node(id string) *replog.Node {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.nodes[id]
}

// running returns the nodes up, in ID order.
func (cl *nodeCluster) running() []*replog.Node {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []*replog.Node
	for _, id := range cl.ids {
		if n := cl.nodes[id]; n != nil {
			out = append(out, n)
		}
	}
	return out
}

// stop closes node id gracefully.
func (cl *nodeCluster) stop(id string) error {
	cl.mu.Lock()
	n := cl.nodes[id]
	delete(cl.nodes, id)
	cl.mu.Unlock()
	return n.Close()
}

// kill stops node id as a killed process looks to its peers: every link
// to and from it is cut first (its connections drop, new ones are
// refused: it hands nothing over and says no goodbye), then it is closed
// in the background (its logs' handovers fail on the cut links). The
// returned channel is closed once the Close has returned.
func (cl *nodeCluster) kill(id string) <-chan struct{} {
	// The links towards it first: a peer whose connection ends probes
	// the node's address through its own link to it (R69), and a probe
	// through a link not cut yet would reach the live process and take it
	// for alive (under load the cuts can be tens of milliseconds apart).
	for _, towards := range []bool{true, false} {
		for k, l := range cl.links {
			if towards && k[1] == id || !towards && k[0] == id {
				l.SetMode(tcplink.Cut)
			}
		}
	}
	cl.mu.Lock()
	n := cl.nodes[id]
	delete(cl.nodes, id)
	cl.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Close() // a crash has no error to report
	}()
	return done
}

// close closes every node at once (a leader's handover to a node closing
// too would be waited for one at a time otherwise), then the links.
func (cl *nodeCluster) close() {
	var wg sync.WaitGroup
	for _, n := range cl.running() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = n.Close()
		}()
	}
	wg.Wait()
	cl.mu.Lock()
	clear(cl.nodes)
	cl.mu.Unlock()
	for _, l := range cl.links {
		_ = l.Close()
	}
}

// logOptions are the named logs' options: the retention and quota flags.
func (c config) logOptions() replog.LogOptions {
	return replog.LogOptions{
		RetentionBytes:        c.retentionBytes,
		RetentionAge:          c.retentionAge,
		SegmentBytes:          c.segmentBytes,
		DisableIdempotence:    c.noIdempotence,
		CatchUpBytesPerSecond: int(c.catchupRate),
		MaxUncommittedBytes:   int(c.maxUncommitted),
	}
}

// logName is the i-th named log of a run.
func logName(i int) string { return fmt.Sprintf("bench-%05d", i) }

// createLogs creates the named logs from..to-1 one after another on n
// and returns each creation's duration.
func createLogs(n *replog.Node, c config, from, to int) ([]time.Duration, error) {
	return createLogsLed(n, c, from, to, nil)
}

// createLogsLed is createLogs that, if led is not nil, also sends it
// each creation's log handle (nil when n is not its replica) and start.
func createLogsLed(n *replog.Node, c config, from, to int, led chan<- created) ([]time.Duration, error) {
	var took []time.Duration
	for i := from; i < to; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
		t0 := time.Now()
		l, err := n.CreateLog(ctx, logName(i), c.logOptions())
		cancel()
		if err != nil {
			return took, fmt.Errorf("create %s: %w", logName(i), err)
		}
		took = append(took, time.Since(t0))
		if led != nil {
			led <- created{l, t0}
		}
	}
	return took, nil
}

// created is a log just created and when its creation started.
type created struct {
	log *replog.Log
	t0  time.Time
}

// timeLed reads the logs created from in until it closes, and returns, for
// each the creating node holds, the time from its creation's start until
// that node knows its leader (polled every millisecond: the log is
// usable then, which CreateLog does not wait for).
func timeLed(in <-chan created) []time.Duration {
	var mu sync.Mutex
	var out []time.Duration
	var wg sync.WaitGroup
	for c := range in {
		if c.log == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(c.t0) < nodeTimeout {
				if c.log.Status().LeaderID != "" {
					mu.Lock()
					out = append(out, time.Since(c.t0))
					mu.Unlock()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	slices.Sort(out)
	return out
}

// handles waits until log name is open on every node of nodes that is
// one of its replicas, and returns those nodes' handles of it.
func handles(nodes []*replog.Node, name string) ([]*replog.Log, error) {
	deadline := time.Now().Add(nodeTimeout)
	var out []*replog.Log
	for _, n := range nodes {
		for {
			l, err := n.Log(name)
			if err == nil {
				out = append(out, l)
				break
			}
			if errors.Is(err, replog.ErrNotReplica) {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("log %s not open on %s: %w", name, n.Default().Status().NodeID, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return out, nil
}

// leaderAmong returns the handle that leads, nil if none does.
func leaderAmong(ls []*replog.Log) *replog.Log {
	for _, l := range ls {
		if l.Status().Role == replog.RoleLeader {
			return l
		}
	}
	return nil
}

// waitBalanced waits until every log of hs is led by its preferred
// leader (the Node's balancer moves it there, about every second), or
// until timeout: the figures then say how the leaders were spread.
func waitBalanced(n *replog.Node, hs map[string][]*replog.Log, timeout time.Duration) {
	pref := map[string]string{}
	for _, li := range n.Logs() {
		pref[li.Name] = li.PreferredLeader
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ok := true
		for name, ls := range hs {
			if l := leaderAmong(ls); l == nil || l.Status().NodeID != pref[name] {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderCounts counts the logs of hs each node leads ("-" for none).
func leaderCounts(hs map[string][]*replog.Log) map[string]int {
	out := map[string]int{}
	for _, ls := range hs {
		if l := leaderAmong(ls); l != nil {
			out[l.Status().NodeID]++
		} else {
			out["-"]++
		}
	}
	return out
}

// setupLogs starts the nodes, creates c's n named logs on the first one
// and waits until each is open on all its replicas and led by its
// preferred leader.
func setupLogs(c config, root string, n int, withLinks bool, w io.Writer) (*nodeCluster, map[string][]*replog.Log, error) {
	cl, err := startNodes(c, root, withLinks)
	if err != nil {
		return nil, nil, err
	}
	hs, err := addLogs(cl, 0, n, w)
	if err != nil {
		cl.close()
		return nil, nil, err
	}
	return cl, hs, nil
}

// addLogs creates the named logs from..to-1 (from -create-concurrency
// goroutines) and returns every log's
// handles once each is open on its replicas and (within nodeTimeout)
// led by its preferred leader.
func addLogs(cl *nodeCluster, from, to int, w io.Writer) (map[string][]*replog.Log, error) {
	nodes := cl.running()
	t0 := time.Now()
	if _, err := createLogsAtOnce(nodes[0], cl.cfg, from, to, cl.cfg.createConcurrency); err != nil {
		return nil, err
	}
	hs := map[string][]*replog.Log{}
	for i := 0; i < to; i++ {
		ls, err := handles(nodes, logName(i))
		if err != nil {
			return nil, err
		}
		hs[logName(i)] = ls
	}
	waitBalanced(nodes[0], hs, nodeTimeout)
	if to > from {
		fmt.Fprintf(w, "created logs %d..%d in %v; leaders %v\n", from, to-1, time.Since(t0).Round(time.Millisecond), leaderCounts(hs))
	}
	return hs, nil
}

// runLogs is -logs: c.clients appenders on each of c.logs named logs, at
// once, each sending to its log's leader (or, with -via all, to each
// replica in turn); it prints the total as the single-log mode does.
func runLogs(c config, root string, record []byte, w io.Writer) (loadResult, error) {
	fmt.Fprintf(w, "nodes=%d logs=%d clients/log=%d (total %d) async=%d size=%dB fsync=%t via=%s duration=%v idempotence=%t ids=%t\n",
		c.nodes, c.logs, c.clients, c.logs*c.clients, c.async, c.size, !c.nosync, c.via, c.duration, !c.noIdempotence, c.ids)
	cl, hs, err := setupLogs(c, root, c.logs, false, w)
	if err != nil {
		return loadResult{}, err
	}
	defer cl.close()
	before := journalCounts(hs)
	ctx, cancel := context.WithTimeout(context.Background(), c.duration)
	defer cancel()
	results := make([]loadResult, c.logs)
	var wg sync.WaitGroup
	u0 := usageNow()
	for i := range c.logs {
		ls := hs[logName(i)]
		leader := leaderAmong(ls)
		if leader == nil {
			leader = ls[0] // it forwards to the leader once there is one
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runLoad(ctx, c, ls, leader, record)
		}()
	}
	wg.Wait()
	// The logs' loads overlap: their own figures would each count all of it.
	total := loadResult{use: usageNow().since(u0)}
	for _, r := range results {
		total.lat = append(total.lat, r.lat...)
		total.failed += r.failed
		total.elapsed = max(total.elapsed, r.elapsed)
	}
	slices.Sort(total.lat)
	if len(total.lat) == 0 {
		return total, fmt.Errorf("no append committed (%d failed)", total.failed)
	}
	total.print(w, "", c.size)
	printJournals(w, before, journalCounts(hs), total.elapsed)
	fmt.Fprintf(w, "leaders at the end %v\n", leaderCounts(hs))
	fmt.Fprintf(w, "peak RSS=%s\n", peakRSS())
	return total, nil
}

// journalCount is a node's shared journal's rounds (its records: the
// named logs' stores share the count), the batches its logs' stores put
// in them, the stores' checkpoints and their time, and the times a
// store's batch waited for a checkpoint to make room in the journal.
type journalCount struct {
	rounds, batches, checkpoints, waits uint64
	checkpointTime                      time.Duration
}

// journalCounts reads, per node, the counters of its named logs' shared
// journal.
func journalCounts(hs map[string][]*replog.Log) map[string]journalCount {
	out := map[string]journalCount{}
	for _, ls := range hs {
		for _, l := range ls {
			s := l.Stats()
			c := out[s.NodeID]
			c.rounds = max(c.rounds, s.StorageGroupCommits)
			c.batches += s.StorageJournalBatches
			c.checkpoints += s.StorageCheckpoints
			c.checkpointTime += s.StorageCheckpointTime
			c.waits += s.StorageJournalWaits
			out[s.NodeID] = c
		}
	}
	return out
}

// printJournals prints each node's journal rounds per second over the
// load and the logs' batches per round (how far one round's fdatasync
// reaches across the logs), and the logs' checkpoints and journal waits
// over the load (what the bbolt commits behind the journal cost, and
// whether they kept up).
func printJournals(w io.Writer, before, after map[string]journalCount, elapsed time.Duration) {
	var ids []string
	for id := range after {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a, z := after[id], before[id]
		r, b := a.rounds-z.rounds, a.batches-z.batches
		per := 0.0
		if r > 0 {
			per = float64(b) / float64(r)
		}
		fmt.Fprintf(w, "journal %s rounds=%d rounds/s=%.0f batches=%d batches/round=%.2f checkpoints=%d checkpoint-time=%v journal-waits=%d\n",
			id, r, float64(r)/elapsed.Seconds(), b, per, a.checkpoints-z.checkpoints, (a.checkpointTime - z.checkpointTime).Round(time.Millisecond), a.waits-z.waits)
	}
}

// idleResult is one -idle-logs window's figures.
type idleResult struct {
	logs int
	// cpuPerNode is the process's CPU over the window divided by the
	// window and the nodes: the share of one core each node used.
	cpuPerNode float64
	// fetchesPerPair is every log's fetches served (the default log's
	// too) per second, divided by the ordered peer pairs.
	fetchesPerPair float64
	// heartbeatsPerPair is the nodes' heartbeats (docs/protocol.md R98)
	// per second, divided by the ordered peer pairs: what an idle pair
	// costs once its logs quiesce.
	heartbeatsPerPair float64
}

// runIdle is -idle-logs: the idle cost of c.idleLogs named logs against
// that of one (CPU, fetches between peers) and against none (heap).
func runIdle(c config, root string, w io.Writer) error {
	fmt.Fprintf(w, "nodes=%d idle-logs=%d window=%v fsync=%t\n", c.nodes, c.idleLogs, c.duration, !c.nosync)
	cl, err := startNodes(c, root, false)
	if err != nil {
		return err
	}
	defer cl.close()
	if _, err := waitLeader(defaults(cl.running()), nodeTimeout); err != nil {
		return err
	}
	// The feature level that named logs need is raised after the first
	// election: the first log's creation waits for it, before heap0.
	if _, err := addLogs(cl, 0, 1, io.Discard); err != nil {
		return err
	}
	one, err := idleWindow(cl, 1, c.duration)
	if err != nil {
		return err
	}
	heap1, rss1 := heapAfterGC(), rssKiB()
	if _, err := addLogs(cl, 1, c.idleLogs, w); err != nil {
		return err
	}
	time.Sleep(idleSettle)
	heapN, rssN := heapAfterGC(), rssKiB()
	if c.memprofile != "" {
		if err := writeHeapProfile(c.memprofile); err != nil {
			return err
		}
	}
	many, err := idleWindow(cl, c.idleLogs, c.duration)
	if err != nil {
		return err
	}
	for _, r := range []idleResult{one, many} {
		fmt.Fprintf(w, "idle logs=%d cpu/node=%.2f%% of a core fetches/s per peer pair=%.1f heartbeats/s per peer pair=%.1f\n",
			r.logs, 100*r.cpuPerNode, r.fetchesPerPair, r.heartbeatsPerPair)
	}
	ratio := 0.0
	if one.fetchesPerPair > 0 {
		ratio = many.fetchesPerPair / one.fetchesPerPair
	}
	// Per log: what the logs after the first added, over the replicas
	// (every node of the process holds one).
	perLog, rssPerLog := 0.0, 0.0
	if added := c.idleLogs - 1; added > 0 {
		perLog = float64(int64(heapN)-int64(heap1)) / 1024 / float64(added)
		if rss1 >= 0 && rssN >= 0 {
			rssPerLog = float64(rssN-rss1) / float64(added)
		}
	}
	fmt.Fprintf(w, "idle logs=%d vs 1: fetches/s per peer pair x%.2f; per idle log heap=%.1fKiB RSS=%.1fKiB (over %d nodes; per node heap=%.1fKiB RSS=%.1fKiB); peak RSS=%s\n",
		c.idleLogs, ratio, perLog, rssPerLog, c.nodes, perLog/float64(c.nodes), rssPerLog/float64(c.nodes), peakRSS())
	return nil
}

// idleSettle is how long -idle-logs waits after creating the logs before
// it measures: the creations' own fetches and checkpoints end first.
const idleSettle = 3 * time.Second

// idleWindow measures the process's CPU and every log's fetches served
// over d, with logs named logs open.
func idleWindow(cl *nodeCluster, logs int, d time.Duration) (idleResult, error) {
	f0, err := fetchesServed(cl)
	if err != nil {
		return idleResult{}, err
	}
	h0 := heartbeatsSent(cl)
	cpu0, t0 := processCPU(), time.Now()
	time.Sleep(d)
	cpu1, el := processCPU(), time.Since(t0)
	h1 := heartbeatsSent(cl)
	f1, err := fetchesServed(cl)
	if err != nil {
		return idleResult{}, err
	}
	nodes := len(cl.ids)
	pairs := max(1, nodes*(nodes-1))
	return idleResult{
		logs:           logs,
		cpuPerNode:     (cpu1 - cpu0).Seconds() / el.Seconds() / float64(nodes),
		fetchesPerPair: float64(f1-f0) / el.Seconds() / float64(pairs),

		heartbeatsPerPair: float64(h1-h0) / el.Seconds() / float64(pairs),
	}, nil
}

// heartbeatsSent sums NodeStats.HeartbeatsSent over every node.
func heartbeatsSent(cl *nodeCluster) uint64 {
	var sum uint64
	for _, n := range cl.running() {
		sum += n.Stats().HeartbeatsSent
	}
	return sum
}

// fetchesServed sums Stats.FetchesServed over every log open on every
// node, the default logs included.
func fetchesServed(cl *nodeCluster) (uint64, error) {
	var sum uint64
	for _, n := range cl.running() {
		sum += n.Default().Stats().FetchesServed
		for _, li := range n.Logs() {
			if !li.Open {
				continue
			}
			l, err := n.Log(li.Name)
			if err != nil {
				return 0, err
			}
			sum += l.Stats().FetchesServed
		}
	}
	return sum, nil
}

// heapAfterGC is the live heap after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rssKiB is the process's resident set now, in KiB (-1 if unknown).
func rssKiB() int64 {
	var kib int64
	if _, err := fmt.Sscanf(procStatus("VmRSS"), "%d kB", &kib); err != nil {
		return -1
	}
	return kib
}

// defaults returns the nodes' default logs.
func defaults(nodes []*replog.Node) []*replog.Log {
	var out []*replog.Log
	for _, n := range nodes {
		out = append(out, n.Default())
	}
	return out
}

// createLogsAtOnce creates the named logs from..to-1 on n from g
// goroutines, each taking the next name, and returns each creation's
// duration.
func createLogsAtOnce(n *replog.Node, c config, from, to, g int) ([]time.Duration, error) {
	return createLogsAtOnceLed(n, c, from, to, g, nil)
}

// createLogsAtOnceLed is createLogsAtOnce sending led what
// createLogsLed does.
func createLogsAtOnceLed(n *replog.Node, c config, from, to, g int, led chan<- created) ([]time.Duration, error) {
	var mu sync.Mutex
	next := from
	var took []time.Duration
	var errs []error
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= to {
					return
				}
				d, err := createLogsLed(n, c, i, i+1, led)
				mu.Lock()
				took = append(took, d...)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return took, errors.Join(errs...)
}

// runCreateLogs is -create-logs: the time to create c.createLogs logs
// on one node, one after another or from -create-concurrency goroutines
// at once, each returning once it is committed and open there.
func runCreateLogs(c config, root string, w io.Writer) error {
	fmt.Fprintf(w, "nodes=%d create-logs=%d create-concurrency=%d fsync=%t\n", c.nodes, c.createLogs, c.createConcurrency, !c.nosync)
	cl, err := startNodes(c, root, false)
	if err != nil {
		return err
	}
	defer cl.close()
	n := cl.running()[0]
	// The first creation waits for the feature level named logs need:
	// not part of what is timed.
	if _, err := createLogs(n, c, 0, 1); err != nil {
		return err
	}
	led := make(chan created, c.createLogs)
	ledDone := make(chan []time.Duration, 1)
	go func() { ledDone <- timeLed(led) }()
	t0 := time.Now()
	took, err := createLogsAtOnceLed(n, c, 1, 1+c.createLogs, c.createConcurrency, led)
	total := time.Since(t0)
	close(led)
	ledTook := <-ledDone
	if err != nil {
		return err
	}
	slices.Sort(took)
	// Placement: how many replicas and preferred leaders each node got.
	load, leads := map[string]int{}, map[string]int{}
	for _, li := range n.Logs() {
		for _, r := range li.Replicas {
			load[r]++
		}
		leads[li.PreferredLeader]++
	}
	fmt.Fprintf(w, "create logs=%d in %v: %.0f logs/s; per create p50=%v p99=%v max=%v; replicas %v preferred leaders %v\n", c.createLogs, total.Round(time.Millisecond),
		float64(c.createLogs)/total.Seconds(), pct(took, 0.5).Round(time.Microsecond), pct(took, 0.99).Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond), load, leads)
	if len(ledTook) > 0 {
		fmt.Fprintf(w, "create logs=%d: from the call to a leader known on the creating node (%d logs): p50=%v p99=%v max=%v\n", c.createLogs, len(ledTook),
			pct(ledTook, 0.5).Round(time.Microsecond), pct(ledTook, 0.99).Round(time.Microsecond), last(ledTook).Round(time.Microsecond))
	}
	return nil
}

// runRestartLogs is -restart-logs: c.restartLogs logs on the nodes, the
// last node closed and opened again; it times, from that Open, until
// every log the node holds accepts an append through it (the log open
// there, a leader known, the append committed), and until the leaders
// are within ±1 of even again (waitEven).
func runRestartLogs(c config, root string, record []byte, w io.Writer) error {
	fmt.Fprintf(w, "nodes=%d restart-logs=%d fsync=%t\n", c.nodes, c.restartLogs, !c.nosync)
	cl, _, err := setupLogs(c, root, c.restartLogs, false, w)
	if err != nil {
		return err
	}
	defer cl.close()
	id := cl.ids[len(cl.ids)-1]
	var mine []string // the logs the node holds: what it opens again
	for _, li := range cl.node(id).Logs() {
		if li.Open {
			mine = append(mine, li.Name)
		}
	}
	held := len(mine)
	if err := cl.stop(id); err != nil {
		return fmt.Errorf("close %s: %w", id, err)
	}
	t0 := time.Now()
	if err := cl.open(id); err != nil {
		return err
	}
	open := time.Since(t0)
	n := cl.node(id)
	// When the node has every log it holds open again (before any has
	// served an append through it).
	allOpen := make(chan time.Duration, 1)
	go func() {
		deadline := time.Now().Add(nodeTimeout)
		for n.Stats().OpenLogs < held && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		allOpen <- time.Since(t0)
	}()
	// When the leaders are within ±1 of even again (the balancers hand
	// the restarted node's logs back, R107), polled from the Open.
	evenAt := make(chan evenResult, 1)
	go func() { evenAt <- waitEven(cl, c.restartLogs, t0) }()
	// With more nodes than a log's replicas, the node holds only some.
	served := make([]time.Duration, held)
	errs := make([]error, held)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // appenders at once
	for i, name := range mine {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			served[i], errs[i] = appendThrough(n, name, record, t0)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slices.Sort(served)
	hs := map[string][]*replog.Log{}
	for i := range c.restartLogs {
		ls, err := handles(cl.running(), logName(i))
		if err != nil {
			return err
		}
		hs[logName(i)] = ls
	}
	fmt.Fprintf(w, "restart logs=%d: open=%v all %d open=%v every log served=%v (per log p50=%v); leaders %v\n", c.restartLogs, open.Round(time.Millisecond),
		held, (<-allOpen).Round(time.Millisecond), served[len(served)-1].Round(time.Millisecond), pct(served, 0.5).Round(time.Millisecond), leaderCounts(hs))
	if ev := <-evenAt; ev.ok {
		fmt.Fprintf(w, "restart logs=%d: leaders within ±1 of even after %v: %v\n", c.restartLogs, ev.took.Round(time.Millisecond), ev.leaders)
	} else {
		fmt.Fprintf(w, "restart logs=%d: leaders not within ±1 of even after %v: %v\n", c.restartLogs, ev.took.Round(time.Millisecond), ev.leaders)
	}
	return nil
}

// evenResult is waitEven's: whether the leaders got within ±1 of even,
// when (from t0), and the leaders per node then.
type evenResult struct {
	ok      bool
	took    time.Duration
	leaders map[string]int
}

// waitEven waits, up to nodeTimeout, until every one of the cluster's
// logs logs is led by a running node and each node leads within ±1 of
// logs/nodes, as the nodes' open logs say.
func waitEven(cl *nodeCluster, logs int, t0 time.Time) evenResult {
	deadline := t0.Add(nodeTimeout)
	for {
		counts, total := map[string]int{}, 0
		nodes := cl.running()
		for _, n := range nodes {
			id := n.Default().Status().NodeID
			counts[id] = 0
			for _, li := range n.Logs() {
				if !li.Open {
					continue
				}
				if l, err := n.Log(li.Name); err == nil && l.Status().Role == replog.RoleLeader {
					counts[id]++
					total++
				}
			}
		}
		lo, hi := logs/len(nodes)-1, (logs+len(nodes)-1)/len(nodes)+1
		ok := total == logs
		for _, k := range counts {
			ok = ok && k >= lo && k <= hi
		}
		if ok || time.Now().After(deadline) {
			return evenResult{ok: ok, took: time.Since(t0), leaders: counts}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// appendThrough appends record to log name through node n, retrying
// until the log is open there and the append commits, and returns the
// time from t0.
func appendThrough(n *replog.Node, name string, record []byte, t0 time.Time) (time.Duration, error) {
	deadline := time.Now().Add(nodeTimeout)
	var l *replog.Log
	for {
		var err error
		if l, err = n.Log(name); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("log %s not open after the restart: %w", name, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for {
		_, err := l.Append(ctx, record)
		if err == nil {
			return time.Since(t0), nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("append to %s after the restart: %w", name, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// runFailover is -failover-logs: c.failoverLogs logs, the node leading
// the most of them killed; it times until every log it led has a leader
// again on the others.
func runFailover(c config, root string, w io.Writer) error {
	fmt.Fprintf(w, "nodes=%d failover-logs=%d fsync=%t\n", c.nodes, c.failoverLogs, !c.nosync)
	if c.nodes < 3 {
		return errors.New("-failover-logs needs -nodes 3 or more (a quorum must survive)")
	}
	cl, hs, err := setupLogs(c, root, c.failoverLogs, true, w)
	if err != nil {
		return err
	}
	defer cl.close()
	counts := leaderCounts(hs)
	victim := ""
	for _, id := range cl.ids {
		if victim == "" || counts[id] > counts[victim] {
			victim = id
		}
	}
	// What the victim led, each with its handles on the others.
	led := map[string][]*replog.Log{}
	for name, ls := range hs {
		if l := leaderAmong(ls); l != nil && l.Status().NodeID == victim {
			for _, o := range ls {
				if o.Status().NodeID != victim {
					led[name] = append(led[name], o)
				}
			}
		}
	}
	// Each led log's epoch and its survivors' elections before the kill:
	// the elections the fail-over took (a split vote costs one more).
	epoch0, elections0 := map[string]uint64{}, map[string]uint64{}
	for name, ls := range led {
		epoch0[name] = ls[0].Status().Epoch
		elections0[name] = electionsStarted(ls)
	}
	var def []*replog.Log
	if n := cl.node(victim); n.Default().Status().Role == replog.RoleLeader {
		for _, o := range cl.running() {
			if o != n {
				def = append(def, o.Default())
			}
		}
	}
	t0 := time.Now()
	closed := cl.kill(victim)
	took := map[string]time.Duration{}
	stood := map[string]time.Duration{} // when a survivor first stood

	defTook := time.Duration(-1)
	deadline := t0.Add(nodeTimeout)
	for len(took) < len(led) || (def != nil && defTook < 0) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d logs without a leader %v after killing %s", len(led)-len(took), len(led), nodeTimeout, victim)
		}
		for name, ls := range led {
			if _, ok := stood[name]; !ok {
				for _, l := range ls {
					if r := l.Status().Role; r == replog.RoleProspective || r == replog.RoleCandidate || r == replog.RoleLeader {
						stood[name] = time.Since(t0)
					}
				}
			}
			if _, ok := took[name]; !ok && leaderAmong(ls) != nil {
				took[name] = time.Since(t0)
			}
		}
		if def != nil && defTook < 0 && leaderAmong(def) != nil {
			defTook = time.Since(t0)
		}
		time.Sleep(2 * time.Millisecond)
	}
	<-closed
	var ds []time.Duration
	for _, d := range took {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	line := fmt.Sprintf("failover killed %s leading %d of %d logs: every log led again in max=%v p50=%v", victim, len(led), c.failoverLogs,
		last(ds).Round(time.Millisecond), pct(ds, 0.5).Round(time.Millisecond))
	if def != nil {
		line += fmt.Sprintf("; default log (led by %s too) in %v", victim, defTook.Round(time.Millisecond))
	}
	fmt.Fprintln(w, line)
	// How many elections (candidacies, each in a new epoch) and epochs each
	// log took: 1 is a fail-over with no split vote.
	elections, epochs := map[uint64]int{}, map[uint64]int{}
	more := 0
	for name, ls := range led {
		e := electionsStarted(ls) - elections0[name]
		elections[e]++
		if e > 1 {
			more++
		}
		if l := leaderAmong(ls); l != nil {
			epochs[l.Status().Epoch-epoch0[name]]++
		}
	}
	// When the first survivor of each log stood (the closed connection's
	// news reached the log), and how many the successor won (R106).
	var stoodAt []time.Duration
	for _, d := range stood {
		stoodAt = append(stoodAt, d)
	}
	slices.Sort(stoodAt)
	won := 0
	for name, ls := range led {
		voters := []string{victim}
		for _, o := range ls {
			voters = append(voters, o.Status().NodeID)
		}
		if l := leaderAmong(ls); l != nil && l.Status().NodeID == replica.Successor(name, voters, victim) {
			won++
		}
	}
	fmt.Fprintf(w, "failover: elections per log %v (%d logs with more than one), epochs per log %v; first voter stood p50=%v max=%v; %d of %d won by the successor\n",
		elections, more, epochs, pct(stoodAt, 0.5).Round(time.Millisecond), last(stoodAt).Round(time.Millisecond), won, len(led))
	return nil
}

// electionsStarted adds up the elections the handles' nodes started for
// their log (Stats.ElectionsStarted).
func electionsStarted(ls []*replog.Log) uint64 {
	var n uint64
	for _, l := range ls {
		n += l.Stats().ElectionsStarted
	}
	return n
}

// pct is d's p-quantile (d sorted), 0 for none.
func pct(d []time.Duration, p float64) time.Duration {
	return loadResult{lat: d}.pct(p)
}

// last is d's largest (d sorted), 0 for none.
func last(d []time.Duration) time.Duration {
	return loadResult{lat: d}.max()
}

// nodeMode runs the many-logs mode c selects, if any (ran false if none).
func nodeMode(c config, root string, w io.Writer) (ran bool, err error) {
	record := make([]byte, c.size)
	for i := range record {
		record[i] = byte('a' + i%26)
	}
	switch {
	case c.logs > 0:
		_, err = runLogs(c, root, record, w)
	case c.idleLogs > 0:
		err = runIdle(c, root, w)
	case c.createLogs > 0:
		err = runCreateLogs(c, root, w)
	case c.restartLogs > 0:
		err = runRestartLogs(c, root, record, w)
	case c.failoverLogs > 0:
		err = runFailover(c, root, w)
	default:
		return false, nil
	}
	return true, err
}
