package main

// The online commands talk to a running node through its admin API: the
// replogadmin handler, which a service mounts on its own HTTP server
// (the example service mounts it under /admin/). status reads GET
// /status, tail pages through GET /entries.

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
	"github.com/replog-io/replog/replogadmin"
)

// defaultAdminPath is where replogctl looks for the admin handler: where
// the example service mounts it, and what replogadmin's doc suggests.
const defaultAdminPath = "/admin"

// addrFlags are the flags that say where a node's admin API is, and
// which of the node's logs a command addresses.
type addrFlags struct {
	addr, path, log *string
}

func declareAddr(fs *flag.FlagSet) addrFlags {
	return addrFlags{
		addr: fs.String("addr", "", "the node's HTTP address, HOST:PORT or scheme://HOST:PORT (required)"),
		path: fs.String("path", defaultAdminPath, "where the service mounts the replogadmin handler (\"/\": at the root)"),
		log:  fs.String("log", "", "the named log of a replog.Node to address (its routes under /logs/NAME/ of a replogadmin.NewNode handler; default: the node's default log)"),
	}
}

// base returns the admin API's base URL for the log addressed, without a
// trailing slash.
func (a addrFlags) base() (string, error) {
	base, err := baseURL(*a.addr, *a.path)
	if err != nil || *a.log == "" {
		return base, err
	}
	if strings.Contains(*a.log, "/") {
		return "", usageError("--log %q: a log name has no '/'", *a.log)
	}
	return base + "/logs/" + url.PathEscape(*a.log), nil
}

func init() {
	register(&command{
		Name:    "status",
		Summary: "show a running node's replication state (its admin API's GET /status)",
		Usage:   "--addr HOST:PORT [--path /admin] [--log NAME] [--json] [--timeout D]",
		Help: `Prints the node's ID, role, epoch, leader, voters, offsets (LEO,
durable LEO, high watermark, readable HW, log start), on the leader each
follower's LEO and lag, and its addresses. --json prints the node's
answer as it is (replog.Status). With --log, the same for the named log
NAME of a replog.Node (replogctl logs lists them), as the node at --addr
holds it; every online command takes --log.

It asks the node's admin API: the replogadmin handler, which the service
mounts on its HTTP server (--path, default /admin; the example service
mounts it there).

Exit status: 0 if the node answered and serves; 1 if it could not be
reached, or reports a failure (its disk failed, or it halted): the
failure is printed too.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			where := declareAddr(fs)
			asJSON := fs.Bool("json", false, "print the node's JSON answer")
			timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q", args)
				}
				base, err := where.base()
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
		Usage:   "--addr HOST:PORT [--path /admin] [--log NAME] [--from N] [--follow=false] [--max N] [--json]",
		Help: `Prints committed entries from offset --from on, one per line:
OFFSET, EPOCH and the record, as text if it is printable UTF-8, else as
"base64:" and its base64. Offsets have gaps where control entries sit:
resume from the last offset + 1. Without --from it starts at the node's
readable high watermark (new entries only). It follows the log until
interrupted, or with --follow=false stops at the node's high watermark
as of the call; --max stops after that many entries. --json prints one
JSON object per entry ({"offset","epoch","time","data"}, data in
base64).

It pages through the node's admin API (GET /entries of the replogadmin
handler, at --path, default /admin), waiting at the end of the log for
new entries.

Exit status: 0 when it stopped as asked (or was interrupted); 1 if the
node could not be reached or reported an error (e.g. --from below the
log start: the error names the offset to resume from).`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			where := declareAddr(fs)
			from := fs.String("from", "", "first offset (default: the node's readable high watermark, new entries only)")
			follow := fs.Bool("follow", true, "wait for new entries; false: stop at the high watermark as of the call")
			maxN := fs.Uint64("max", 0, "stop after this many entries (0: no limit)")
			asJSON := fs.Bool("json", false, "print one JSON object per entry")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q", args)
				}
				base, err := where.base()
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

// baseURL turns --addr (HOST:PORT or an http(s) URL without a path) and
// --path into the admin API's base URL, without a trailing slash.
func baseURL(addr, path string) (string, error) {
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
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return "", usageError("--addr %q: give only the scheme and HOST:PORT; where the admin handler is mounted goes in --path", addr)
	}
	if !strings.HasPrefix(path, "/") {
		return "", usageError("--path %q: want an absolute path such as /admin", path)
	}
	u.Path = strings.TrimSuffix(path, "/")
	return u.String(), nil
}

// client has no overall timeout: tail follows for as long as it runs.
// Contexts bound each call.
var client = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	ResponseHeaderTimeout: 30 * time.Second,
	IdleConnTimeout:       30 * time.Second,
}}

// adminError is the admin API's error body.
type adminError struct {
	Error    string   `json:"error"`
	Code     string   `json:"code"`
	Leader   string   `json:"leader"`
	LogStart *uint64  `json:"log_start"`
	Replicas []string `json:"replicas"`
}

// changeClient makes the requests that change the cluster: a change may
// take as long as the handler's ChangeTimeout before the answer's
// headers come, so only the command's --timeout bounds it.
var changeClient = &http.Client{Transport: &http.Transport{
	Proxy:           http.ProxyFromEnvironment,
	IdleConnTimeout: 30 * time.Second,
}}

// get GETs base+route and returns the body if the answer is 200;
// otherwise an error saying what the node (or whatever answered) said.
func get(ctx context.Context, base, route string) ([]byte, error) {
	return request(ctx, client, http.MethodGet, base, route)
}

// request makes one request of the admin API (see get).
func request(ctx context.Context, c *http.Client, method, base, route string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+route, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named below
		}
		return nil, fmt.Errorf("cannot reach the node at %s: %w", base+route, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", base+route, err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	var ae adminError
	if json.Unmarshal(body, &ae) == nil && ae.Error != "" && ae.Code != "" {
		switch {
		case ae.Code == "out_of_range" && ae.LogStart != nil:
			return nil, fmt.Errorf("%s: %s: the entries below offset %d were deleted; resume with --from %d", route, ae.Error, *ae.LogStart, *ae.LogStart)
		case ae.Leader != "":
			return nil, fmt.Errorf("%s: %s (leader: %s)", route, ae.Error, ae.Leader)
		case ae.Code == "not_replica" && len(ae.Replicas) > 0:
			return nil, fmt.Errorf("%s: %s: ask one of its replicas (%s)", route, ae.Error, strings.Join(ae.Replicas, ", "))
		}
		return nil, fmt.Errorf("%s: %s", route, ae.Error)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s: 404 Not Found: no replog admin API there; is --path right? (the service mounts the replogadmin handler somewhere; the default is %s)", base+route, defaultAdminPath)
	}
	return nil, fmt.Errorf("%s: %s: %.200s", base+route, resp.Status, body)
}

// fetchStatus returns the node's status and its raw JSON.
func fetchStatus(ctx context.Context, base string) (replog.Status, []byte, error) {
	raw, err := get(ctx, base, "/status")
	if err != nil {
		return replog.Status{}, nil, err
	}
	var st replog.Status
	if err := json.Unmarshal(raw, &st); err != nil || st.NodeID == "" {
		return replog.Status{}, nil, fmt.Errorf("%s/status: the answer is not a replog node's status (is --path right?)", base)
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
	from   *uint64 // nil: the node's readable high watermark
	follow bool
	max    uint64
	json   bool
}

// tailWait is how long one page request waits at the end of the log:
// below the client's ResponseHeaderTimeout and replogadmin's default
// MaxWait, so that a quiet log costs a request every tailWait.
const tailWait = 20 * time.Second

func (t tailer) run(ctx context.Context, e *env) error {
	var next uint64
	if t.from != nil {
		next = *t.from
	} else {
		st, _, err := fetchStatus(ctx, t.base)
		if err != nil {
			return t.ended(ctx, err)
		}
		next = st.ReadableHW
	}
	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	stop, first := uint64(0), true // stop: with --follow=false, the HW of the first page
	var n uint64
	for {
		route := fmt.Sprintf("/entries?from=%d&limit=1000", next)
		if t.follow {
			route += "&wait=" + tailWait.String()
		}
		raw, err := get(ctx, t.base, route)
		if err != nil {
			return t.ended(ctx, err)
		}
		var page replogadmin.PageJSON
		if err := json.Unmarshal(raw, &page); err != nil || page.Next < next {
			return fmt.Errorf("%s%s: not a page of entries", t.base, route)
		}
		if first {
			stop, first = page.HW, false
		}
		for _, en := range page.Entries {
			if !t.follow && en.Offset >= stop {
				return nil
			}
			if t.json {
				err = enc.Encode(en)
			} else {
				_, err = fmt.Fprintf(out, "%d\t%d\t%s\n", en.Offset, en.Epoch, printable(en.Data))
			}
			if err != nil {
				return err
			}
			if n++; t.max > 0 && n >= t.max {
				return nil
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		next = page.Next
		if !t.follow && next >= stop {
			return nil
		}
	}
}

// ended returns what tail reports for err: nothing if it was interrupted.
func (t tailer) ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// printable returns data as text if it is printable UTF-8 (spaces
// allowed, no control characters), else "base64:" and its base64.
func printable(data []byte) string {
	if utf8.Valid(data) && !strings.ContainsFunc(string(data), func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return string(data)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(data)
}
