package main

// The commands that change the cluster, through the admin API's POST
// routes. A replogadmin handler refuses them unless the service built it
// with Options.AllowChanges (the error says so): being able to read a
// node's state does not make one able to reconfigure its cluster.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/replog-io/replog/replogadmin"
)

// changeHelp is what every change command's help ends with.
const changeHelp = `It needs a replogadmin handler built with Options.AllowChanges (a
read-only one refuses: exit 1, saying so).`

func init() {
	register(&command{
		Name:    "transfer",
		Summary: "hand a running leader's leadership over to another voter (POST /leader/transfer)",
		Usage:   "--addr HOST:PORT [--path /admin] [--log NAME] [--to ID] [--timeout D]",
		Help: `Asks the leader at --addr to hand its leadership over to voter --to
(default: the voter with the longest log) and waits until another node
leads; prints the new leader and epoch. Ask the leader: another node
answers that it is not, naming the leader.

` + changeHelp + `

Exit status: 0 once another node leads; 1 if the node is not the leader,
no voter can take over, the successor did not catch up, or the node
could not be reached.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			where := declareAddr(fs)
			to := fs.String("to", "", "the successor's node ID (default: the most caught-up voter)")
			timeout := fs.Duration("timeout", time.Minute, "give up after this long")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q", args)
				}
				var tr replogadmin.TransferJSON
				if err := change(ctx, where, *timeout, "/leader/transfer?to="+url.QueryEscape(*to), &tr); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "leader is now %s (epoch %d)\n", tr.LeaderID, tr.Epoch)
				return nil
			}
		},
	})
	for _, add := range []bool{true, false} {
		name, verb, route := "remove-voter", "removes voter NODE", "/voters/remove"
		summary := "remove a voter from a running cluster (POST /voters/remove)"
		more := `The removed node keeps running as an observer; a removed leader steps
down once the change commits.`
		if add {
			name, verb, route = "add-voter", "makes NODE a voter (at the data directory it fetches from)", "/voters/add"
			summary = "make a running observer a voter (POST /voters/add)"
			more = `NODE must be running and fetching from the leader (an observer); the
change waits until it has caught up.`
		}
		register(&command{
			Name:    name,
			Summary: summary,
			Usage:   "--addr HOST:PORT [--path /admin] [--log NAME] [--timeout D] NODE",
			Help: fmt.Sprintf(`Asks the node at --addr (any node: a follower forwards it to the
leader) to change the voters: it %s, and returns once the change is
committed; prints the voters in force then. One change at a time: it
waits for another in progress. %s

%s

Exit status: 0 once the change is committed; 1 if it was refused (not a
voter, the last voter, not caught up in time, ...) or the node could not
be reached; after a timeout the change may still happen (status shows
the voters).`, verb, more, changeHelp),
			Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
				where := declareAddr(fs)
				timeout := fs.Duration("timeout", time.Minute, "give up after this long")
				return func(ctx context.Context, e *env, args []string) error {
					if len(args) != 1 || args[0] == "" {
						return usageError("want one node ID, got %d arguments", len(args))
					}
					var vs replogadmin.VotersJSON
					if err := change(ctx, where, *timeout, route+"?node="+url.QueryEscape(args[0]), &vs); err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "voters: %s\n", strings.Join(voterIDs(vs), ","))
					return nil
				}
			},
		})
	}
	register(&command{
		Name:    "delete-before",
		Summary: "delete a running cluster's entries below an offset (POST /delete-before)",
		Usage:   "--addr HOST:PORT [--path /admin] [--log NAME] [--timeout D] OFFSET",
		Help: `Asks the node at --addr (any node) to delete the entries below OFFSET
on every node (Log.DeleteBefore) and prints the node's log start once
it covers them: OFFSET, or a little less, since only committed entries
go and the last committed one stays. The deletion cannot be undone.

` + changeHelp + `

Exit status: 0 once the node's log start covers the deletion; 1 if it
failed or the node could not be reached.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			where := declareAddr(fs)
			timeout := fs.Duration("timeout", time.Minute, "give up after this long")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usageError("want one offset, got %d arguments", len(args))
				}
				off, err := strconv.ParseUint(args[0], 10, 64)
				if err != nil {
					return usageError("%q is not an offset", args[0])
				}
				var d replogadmin.DeleteJSON
				if err := change(ctx, where, *timeout, fmt.Sprintf("/delete-before?offset=%d", off), &d); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "log start %d (asked for %d; high watermark %d)\n", d.LogStart, d.Requested, d.HW)
				return nil
			}
		},
	})
}

// change POSTs route to the admin API and decodes the answer into v.
func change(ctx context.Context, where addrFlags, timeout time.Duration, route string, v any) error {
	base, err := where.base()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	raw, err := request(ctx, changeClient, "POST", base, route)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer within --timeout %v; the change may still happen (replogctl status shows the voters and leader): %w", timeout, err)
		}
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s%s: not an answer of the admin API: %w", base, route, err)
	}
	return nil
}

func voterIDs(vs replogadmin.VotersJSON) []string {
	out := make([]string, len(vs.Voters))
	for i, v := range vs.Voters {
		out[i] = v.ID
	}
	return out
}
