package main

// logs lists a replog.Node's logs through its admin API (GET /logs of a
// replogadmin.NewNode handler); status, tail and the changes address one
// of them with --log.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replog-io/replog/replogadmin"
)

func init() {
	register(&command{
		Name:    "logs",
		Summary: "list a running Node's logs with each one's leader, LEO, HW and replicas (GET /logs)",
		Usage:   "--addr HOST:PORT [--path /admin] [--json] [--timeout D]",
		Help: `Prints one line per log of the node's catalog, the default log first
(shown as "(default)"): NAME, LEADER (the leader the node at --addr knows;
"-" where the log is not open there), LEO, HW, REPLICAS (the preferred
leader marked with *) and HERE (open, or "not a replica", or "opening":
created, not open there yet). Offsets are as the node at --addr holds
them; a log it does not hold has none ("-"): ask one of its replicas.
--json prints the node's answer as it is. Inspect one log with
replogctl status --log NAME.

It needs the admin handler of a replog.Node (replogadmin.NewNode); a
Log's handler (replogadmin.New) has no /logs, and the error says so.

Exit status: 0 if the node answered; 1 if it could not be reached or
serves one Log only.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			addr := fs.String("addr", "", "the node's HTTP address, HOST:PORT or scheme://HOST:PORT (required)")
			path := fs.String("path", defaultAdminPath, "where the service mounts the replogadmin handler (\"/\": at the root)")
			asJSON := fs.Bool("json", false, "print the node's JSON answer")
			timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q", args)
				}
				base, err := baseURL(*addr, *path)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				return listLogs(ctx, e, base, *asJSON)
			}
		},
	})
}

func listLogs(ctx context.Context, e *env, base string, asJSON bool) error {
	raw, err := get(ctx, base, "/logs")
	if err != nil {
		if strings.Contains(err.Error(), "no admin route /logs") {
			return fmt.Errorf("%w: the handler at %s serves one Log, not a Node (the service builds it with replogadmin.New; replogadmin.NewNode serves a Node's logs)", err, base)
		}
		return err
	}
	var ls replogadmin.LogsJSON
	if err := json.Unmarshal(raw, &ls); err != nil || ls.NodeID == "" {
		return fmt.Errorf("%s/logs: the answer is not a replog node's list of logs (is --path right?)", base)
	}
	if asJSON {
		_, _ = e.stdout.Write(raw)
		if len(raw) > 0 && raw[len(raw)-1] != '\n' {
			fmt.Fprintln(e.stdout)
		}
		return nil
	}
	printLogs(e.stdout, ls)
	return nil
}

func printLogs(w io.Writer, ls replogadmin.LogsJSON) {
	fmt.Fprintf(w, "node %s: %d logs\n", ls.NodeID, len(ls.Logs))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLEADER\tLEO\tHW\tREPLICAS\tHERE")
	for _, l := range ls.Logs {
		name := l.Name
		if name == "" {
			name = "(default)"
		}
		var reps []string
		for _, r := range l.Replicas {
			if r == l.PreferredLeader {
				r += "*"
			}
			reps = append(reps, r)
		}
		leader, leo, hw, here := "-", "-", "-", "open"
		switch {
		case l.Open:
			leader, leo, hw = l.LeaderID, fmt.Sprint(l.LEO), fmt.Sprint(l.HW)
			if leader == "" {
				leader = "(none known)"
			}
		case !l.Local:
			here = "not a replica"
		default:
			here = "opening"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, leader, leo, hw, strings.Join(reps, ","), here)
	}
	_ = tw.Flush()
}
