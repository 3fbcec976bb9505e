package main

// The online commands talk to a running node through the HTTP API of the
// example service (example/README.md): GET /status and GET /entries.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/replog-io/replog"
)

func init() {
	register(&command{
		Name:    "status",
		Summary: "show a running node's replication state (its HTTP API's GET /status)",
		Usage:   "--addr HOST:PORT [--json] [--timeout D]",
		Help: `Prints the node's ID, role, epoch, leader, voters, offsets (LEO,
durable LEO, high watermark, readable HW, log start), on the leader each
follower's LEO and lag, and its addresses. --json prints the node's
answer as it is (replog.Status).

Exit status: 0 if the node answered and serves; 1 if it could not be
reached, or reports a failure (its disk failed, or it halted): the
failure is printed too.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			addr := fs.String("addr", "", "the node's HTTP address, HOST:PORT or a URL (required)")
			asJSON := fs.Bool("json", false, "print the node's JSON answer")
			timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q", args)
				}
				base, err := baseURL(*addr)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				return status(ctx, e, base, *asJSON)
			}
		},
	})
	register(&command{
		Name:    "tail",
		Summary: "print a running node's committed entries, following new ones (GET /entries)",
		Usage:   "--addr HOST:PORT [--from N] [--follow=false] [--max N] [--json]",
		Help: `Prints committed entries from offset --from on, one per line:
OFFSET, EPOCH and the record, as text if it is printable UTF-8, else as
"base64:" and its base64. Offsets have gaps where control entries sit:
resume from the last offset + 1. Without --from it starts at the node's
high watermark (new entries only). It follows the log until interrupted,
or with --follow=false stops at the node's high watermark as of the
call; --max stops after that many entries. --json prints the API's lines
({"offset","epoch","data"}, data in base64).

Exit status: 0 when it stopped as asked (or was interrupted); 1 if the
node could not be reached or reported an error (e.g. --from below the
log start).`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			addr := fs.String("addr", "", "the node's HTTP address, HOST:PORT or a URL (required)")
			from := fs.String("from", "", "first offset (default: the node's high watermark, new entries only)")
			follow := fs.Bool("follow", true, "wait for new entries; false: stop at the high watermark as of the call")
			maxN := fs.Uint64("max", 0, "stop after this many entries (0: no limit)")
			asJSON := fs.Bool("json", false, "print the API's JSON lines")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q", args)
				}
				base, err := baseURL(*addr)
				if err != nil {
					return err
				}
				t := tailer{base: base, follow: *follow, max: *maxN, json: *asJSON}
				if *from != "" {
					n, err := strconv.ParseUint(*from, 10, 64)
					if err != nil {
						return usageError("--from %q: not an offset", *from)
					}
					t.from = &n
				}
				return t.run(ctx, e)
			}
		},
	})
}

// baseURL turns --addr (HOST:PORT or an http(s) URL) into a base URL
// without a trailing slash.
func baseURL(addr string) (string, error) {
	if addr == "" {
		return "", usageError("--addr is required")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError("--addr %q: want HOST:PORT or an http(s) URL", addr)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// client has no overall timeout: tail follows for as long as it runs.
// Contexts bound each call.
var client = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	ResponseHeaderTimeout: 30 * time.Second,
	IdleConnTimeout:       30 * time.Second,
}}

// get GETs base+path and returns the response if it is 200; otherwise
// the API's error message.
func get(ctx context.Context, base, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var apiErr struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &apiErr) == nil && apiErr.Error != "" {
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, apiErr.Error)
	}
	return nil, fmt.Errorf("%s: %s: %.200s", path, resp.Status, body)
}

// fetchStatus returns the node's status and its raw JSON.
func fetchStatus(ctx context.Context, base string) (replog.Status, []byte, error) {
	resp, err := get(ctx, base, "/status")
	if err != nil {
		return replog.Status{}, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return replog.Status{}, nil, err
	}
	var st replog.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return replog.Status{}, nil, fmt.Errorf("/status: not a node's status: %w", err)
	}
	return st, raw, nil
}

func status(ctx context.Context, e *env, base string, asJSON bool) error {
	st, raw, err := fetchStatus(ctx, base)
	if err != nil {
		return err
	}
	if asJSON {
		_, _ = e.stdout.Write(raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			fmt.Fprintln(e.stdout)
		}
	} else {
		printStatus(e.stdout, st)
	}
	if st.Error != "" {
		return fmt.Errorf("node %s has stopped serving: %s", st.NodeID, st.Error)
	}
	return nil
}

// shortDir abbreviates a directory ID (random hex) for people.
func shortDir(dir string) string { return dir[:min(8, len(dir))] }

// incarnationNames renders the voters as node/directory (abbreviated; no
// directory before the cluster recorded its voters), each marked
// "(behind)" on the leader when it has not caught up.
func incarnationNames(st replog.Status) []string {
	out := make([]string, len(st.Voters))
	for i, v := range st.Voters {
		out[i] = v.ID
		if v.DirectoryID != "" {
			out[i] += "/" + shortDir(v.DirectoryID)
		}
		if st.Role == replog.RoleLeader && !v.CaughtUp {
			out[i] += " (behind)"
		}
	}
	return out
}

// observerNames renders nodes as node/directory (abbreviated).
func observerNames(ns []replog.Incarnation) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID + "/" + shortDir(n.DirectoryID)
	}
	return out
}

func printStatus(w io.Writer, st replog.Status) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	leader := st.LeaderID
	if leader == "" {
		leader = "(none known)"
	}
	row("node", "%s", st.NodeID)
	row("role", "%s", st.Role)
	row("epoch", "%d", st.Epoch)
	row("leader", "%s", leader)
	row("voters", "%s", strings.Join(incarnationNames(st), ","))
	if len(st.Observers) > 0 {
		row("observers", "%s", strings.Join(observerNames(st.Observers), ","))
	}
	if len(st.Replacing) > 0 {
		row("replacing", "%s", strings.Join(observerNames(st.Replacing), ","))
	}
	row("leo", "%d (durable %d)", st.LEO, st.DurableLEO)
	row("high watermark", "%d (readable here %d)", st.HighWatermark, st.ReadableHW)
	row("log start", "%d", st.LogStart)
	if len(st.RemoteLEO) > 0 {
		ids := make([]string, 0, len(st.RemoteLEO))
		for id := range st.RemoteLEO {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for i, id := range ids {
			k := ""
			if i == 0 {
				k = "followers"
			}
			r := st.RemoteLEO[id]
			var lag uint64
			if st.LEO > r {
				lag = st.LEO - r
			}
			row(k, "%s leo %d (%d behind)", id, r, lag)
		}
	}
	if st.RPCAddr != "" {
		row("rpc", "%s", st.RPCAddr)
	}
	if st.GossipAddr != "" {
		row("gossip", "%s", st.GossipAddr)
	}
	if st.Error != "" {
		row("error", "%s", st.Error)
	}
	_ = tw.Flush()
}

// tailer is one run of tail.
type tailer struct {
	base   string
	from   *uint64 // nil: the node's high watermark
	follow bool
	max    uint64
	json   bool
}

// entryLine is one line of GET /entries: an entry, or a last error.
type entryLine struct {
	Offset uint64  `json:"offset"`
	Epoch  uint64  `json:"epoch"`
	Data   []byte  `json:"data"`
	Error  *string `json:"error"`
}

func (t tailer) run(ctx context.Context, e *env) error {
	from := uint64(0)
	if t.from != nil {
		from = *t.from
	} else {
		st, _, err := fetchStatus(ctx, t.base)
		if err != nil {
			return err
		}
		from = st.HighWatermark
	}
	resp, err := get(ctx, t.base, fmt.Sprintf("/entries?from=%d&follow=%t", from, t.follow))
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return err
	}
	defer resp.Body.Close()
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20) // a 1 MiB record is ~1.4 MB of base64
	var n uint64
	for sc.Scan() {
		line := sc.Bytes()
		var el entryLine
		if err := json.Unmarshal(line, &el); err != nil {
			return fmt.Errorf("/entries: bad line %.100q: %w", line, err)
		}
		if el.Error != nil {
			return fmt.Errorf("/entries: the node reports: %s", *el.Error)
		}
		if t.json {
			_, _ = out.Write(line)
			_ = out.WriteByte('\n')
		} else {
			fmt.Fprintf(out, "%d\t%d\t%s\n", el.Offset, el.Epoch, printable(el.Data))
		}
		if t.follow {
			if err := out.Flush(); err != nil {
				return err
			}
		}
		if n++; t.max > 0 && n >= t.max {
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("/entries: %w", err)
	}
	return nil
}

// printable returns data as text if it is printable UTF-8 (spaces
// allowed, no control characters), else "base64:" and its base64.
func printable(data []byte) string {
	if utf8.Valid(data) && !strings.ContainsFunc(string(data), func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return string(data)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(data)
}
