// Command fakenode is a stand-in for the example node with the same flags
// and HTTP API, used to exercise the fault harness itself (processes,
// proxies, nemesis, checker) independently of replog's core.
//
// It is primary-backup without fail-over: the first voter is always the
// leader; followers pull its log over the (proxied) RPC address with a
// long-poll fetch; the leader's HW is the majority's durable LEO; every
// node shows only entries below its HW. Kills of the leader make the
// cluster unavailable until it restarts, but never lose acknowledged
// appends. With -fake-bug-lose the leader acknowledges before its write is
// durable and keeps it only in memory until committed, so a kill loses
// acknowledged appends: the harness must notice.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type node struct {
	id, leader string
	voters     []string
	bugLose    bool

	mu      sync.Mutex
	log     []string // payloads
	durable int      // entries written to file
	hw      int
	remote  map[string]int
	changed chan struct{} // closed and replaced when log or hw change
	file    *os.File
}

func (n *node) notify() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// persist writes log[durable:upto] to the file with fsync.
func (n *node) persist(upto int) error {
	var b strings.Builder
	for _, p := range n.log[n.durable:upto] {
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(p)))
		b.WriteByte('\n')
	}
	if _, err := n.file.WriteString(b.String()); err != nil {
		return err
	}
	if err := n.file.Sync(); err != nil {
		return err
	}
	n.durable = upto
	return nil
}

// advanceHW recomputes the leader's HW from the majority's LEO.
func (n *node) advanceHW() {
	leos := []int{n.durable}
	if n.bugLose {
		leos[0] = len(n.log)
	}
	for _, v := range n.voters {
		if v != n.id {
			leos = append(leos, n.remote[v])
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(leos)))
	if hw := leos[len(n.voters)/2]; hw > n.hw {
		n.hw = min(hw, len(n.log))
		if n.bugLose && n.hw > n.durable {
			_ = n.persist(n.hw)
		}
		n.notify()
	}
}

func (n *node) appendLocal(ctx context.Context, payload string) (int, error) {
	n.mu.Lock()
	off := len(n.log)
	n.log = append(n.log, payload)
	if !n.bugLose {
		if err := n.persist(len(n.log)); err != nil {
			n.mu.Unlock()
			return 0, err
		}
	}
	n.advanceHW()
	n.notify()
	if n.bugLose {
		n.mu.Unlock()
		return off, nil // the bug: ack before commit and before fsync
	}
	for n.hw <= off {
		ch := n.changed
		n.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		n.mu.Lock()
	}
	n.mu.Unlock()
	return off, nil
}

type fetchResp struct {
	Entries []string `json:"entries"`
	HW      int      `json:"hw"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func main() {
	id := flag.String("id", "", "node ID")
	dir := flag.String("dir", "", "data dir")
	httpAddr := flag.String("http", "127.0.0.1:0", "HTTP address")
	rpcAddr := flag.String("rpc", "127.0.0.1:0", "RPC address")
	voters := flag.String("voters", "", "voters")
	peers := flag.String("peers", "", "peers")
	maxWait := flag.Duration("fetch-max-wait", 200*time.Millisecond, "")
	appendTimeout := flag.Duration("append-timeout", 3*time.Second, "")
	bugLose := flag.Bool("fake-bug-lose", false, "ack before durable and committed")
	for _, ignored := range []string{"gossip", "http-peers", "cluster", "fetch-timeout", "election-timeout", "sample-interval", "secret-file"} {
		flag.String(ignored, "", "ignored")
	}
	flag.Bool("insecure", false, "ignored")
	flag.Parse()

	n := &node{id: *id, voters: strings.Split(*voters, ","), bugLose: *bugLose,
		remote: map[string]int{}, changed: make(chan struct{})}
	n.leader = n.voters[0]
	peer := map[string]string{}
	for _, kv := range strings.Split(*peers, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			peer[k] = v
		}
	}
	path := filepath.Join(*dir, "fake.log")
	if data, err := os.ReadFile(path); err == nil {
		lines := strings.Split(string(data), "\n")
		good := 0
		for _, l := range lines[:len(lines)-1] { // the last piece is "" or a torn line
			p, err := base64.StdEncoding.DecodeString(l)
			if err != nil {
				break
			}
			n.log = append(n.log, string(p))
			good += len(l) + 1
		}
		if err := os.Truncate(path, int64(good)); err != nil {
			panic(err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	n.file, n.durable = f, len(n.log)
	if len(n.voters) == 1 {
		n.hw = len(n.log)
	}

	client := &http.Client{Timeout: *appendTimeout + time.Second}
	rpc := http.NewServeMux()
	rpc.HandleFunc("/rpc/fetch", func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.URL.Query().Get("from"))
		who := r.URL.Query().Get("id")
		deadline := time.After(*maxWait)
		n.mu.Lock()
		if from <= len(n.log) {
			n.remote[who] = max(n.remote[who], from)
			n.advanceHW()
		}
	wait:
		for from >= len(n.log) {
			ch := n.changed
			n.mu.Unlock()
			select {
			case <-ch:
				n.mu.Lock()
			case <-deadline:
				n.mu.Lock()
				break wait
			}
		}
		if from >= len(n.log) {
			resp := fetchResp{HW: n.hw}
			n.mu.Unlock()
			writeJSON(w, 200, resp)
			return
		}
		resp := fetchResp{Entries: append([]string(nil), n.log[from:min(len(n.log), from+500)]...), HW: n.hw}
		n.mu.Unlock()
		writeJSON(w, 200, resp)
	})
	rpc.HandleFunc("/rpc/append", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ctx, cancel := context.WithTimeout(r.Context(), *appendTimeout)
		defer cancel()
		off, err := n.appendLocal(ctx, string(body))
		if err != nil {
			writeJSON(w, 504, map[string]any{"error": err.Error(), "outcome": "unknown"})
			return
		}
		writeJSON(w, 200, map[string]any{"offset": off})
	})
	rln, err := net.Listen("tcp", *rpcAddr)
	if err != nil {
		panic(err)
	}
	go func() { _ = http.Serve(rln, rpc) }()

	if n.id != n.leader {
		go func() {
			for {
				n.mu.Lock()
				from := len(n.log)
				n.mu.Unlock()
				resp, err := client.Get(fmt.Sprintf("http://%s/rpc/fetch?id=%s&from=%d", peer[n.leader], n.id, from))
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var fr fetchResp
				err = json.NewDecoder(resp.Body).Decode(&fr)
				resp.Body.Close()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				n.mu.Lock()
				if len(n.log) == from {
					n.log = append(n.log, fr.Entries...)
					if err := n.persist(len(n.log)); err != nil {
						panic(err)
					}
				}
				if hw := min(fr.HW, len(n.log)); hw > n.hw {
					n.hw = hw
				}
				n.notify()
				n.mu.Unlock()
			}
		}()
	}

	api := http.NewServeMux()
	api.HandleFunc("/append", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if n.id == n.leader {
			ctx, cancel := context.WithTimeout(r.Context(), *appendTimeout)
			defer cancel()
			off, err := n.appendLocal(ctx, string(body))
			if err != nil {
				writeJSON(w, 504, map[string]any{"error": err.Error(), "outcome": "unknown"})
				return
			}
			writeJSON(w, 200, map[string]any{"offset": off})
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), "POST", "http://"+peer[n.leader]+"/rpc/append", strings.NewReader(string(body)))
		resp, err := client.Do(req)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				writeJSON(w, 503, map[string]any{"error": err.Error(), "outcome": "failed", "leader": n.leader})
				return
			}
			writeJSON(w, 504, map[string]any{"error": err.Error(), "outcome": "unknown"})
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
	api.HandleFunc("/entries", func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.URL.Query().Get("from"))
		follow := r.URL.Query().Get("follow") != "false"
		w.Header().Set("Content-Type", "application/x-ndjson")
		n.mu.Lock()
		end := n.hw
		n.mu.Unlock()
		bw := bufio.NewWriter(w)
		for {
			n.mu.Lock()
			for from < n.hw && (follow || from < end) {
				fmt.Fprintf(bw, "{\"offset\":%d,\"epoch\":1,\"data\":%q}\n", from, base64.StdEncoding.EncodeToString([]byte(n.log[from])))
				from++
			}
			ch := n.changed
			n.mu.Unlock()
			if bw.Flush() != nil || !follow {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
	})
	api.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		role := "follower"
		if n.id == n.leader {
			role = "leader"
		}
		writeJSON(w, 200, map[string]any{"node_id": n.id, "role": role, "epoch": 1, "leader_id": n.leader,
			"leo": len(n.log), "hw": n.hw})
	})
	hln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		panic(err)
	}
	fmt.Printf("http=%s\n", hln.Addr())
	panic(http.Serve(hln, api))
}
