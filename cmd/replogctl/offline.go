package main

// The offline commands read a stopped node's data directory, read-only
// (openDir): nothing in it is changed, and while a node holds the
// directory they fail (the directory is locked) instead of reading a log
// that moves under them.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

func init() {
	register(&command{
		Name:    "inspect",
		Summary: "describe a stopped node's data directory: identity, segments, offsets, epochs, voter sets, vote, HW",
		Usage:   "[--json] [--timeout D] DIR",
		Help: `Prints what the data directory DIR holds, read-only: its identity
(cluster, node, directory ID), the log start and LEO (log end offset),
the epoch map (epoch and first offset), the voter sets (the offset of
each voters entry and its voters as node/directory; a first one below
the log start is the set in force there), the HW checkpoint, the quorum
state (epoch, vote, leader) and the segment files (offset range, size;
the active one last). Only the active segment is read. --json prints the
same as one JSON object.

The HW checkpoint is the high watermark (the end of what is committed)
as the node last saved it, at most once a second: it may lag the LEO,
even after a clean shutdown, by design. A starting node learns the real
high watermark from its leader; nothing above the checkpoint is lost or
cut because of it.

Exit status: 0 if the directory could be read; 1 if not (a node holds
it, it is damaged, or it is not a replog data directory).`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			asJSON := fs.Bool("json", false, "print one JSON object")
			timeout := fs.Duration("timeout", time.Second, "wait this long for the directory's lock")
			return func(ctx context.Context, e *env, args []string) error {
				dir, err := dirArg(args)
				if err != nil {
					return err
				}
				return inspect(e, dir, *timeout, *asJSON)
			}
		},
	})
	register(&command{
		Name:    "verify",
		Summary: "check every segment of a stopped node's data directory, every entry's checksum",
		Usage:   "[--timeout D] DIR",
		Help: `Reads the whole log of the data directory DIR, read-only: the
structure of every segment file, the state the active segment records,
and every entry from the log start to the LEO (present, contiguous, its
checksum, the epoch the epoch map gives it). Prints what it checked, or
the first problem, naming the file and the offset.

Exit status: 0 if everything checked out; 1 if something is damaged or
the directory could not be read (a node holds it, no data file).`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			timeout := fs.Duration("timeout", time.Second, "wait this long for the directory's lock")
			return func(ctx context.Context, e *env, args []string) error {
				dir, err := dirArg(args)
				if err != nil {
					return err
				}
				if err := checkDir(dir); err != nil {
					return err
				}
				r, err := storage.VerifyDir(dir, storage.DirOptions{Timeout: *timeout})
				if err != nil {
					return dirError(dir, *timeout, err)
				}
				fmt.Fprintf(e.stdout, "ok: %d entries [%d, %d) in %d segment files, every checksum verified\n",
					r.Entries, r.LogStart, r.LEO, r.Segments)
				return nil
			}
		},
	})
	register(&command{
		Name:    "dump",
		Summary: "print entries of a stopped node's data directory as JSON lines",
		Usage:   "[--from N] [--to M] [--timeout D] DIR",
		Help: `Prints the entries of the data directory DIR with offsets in
[--from, --to), read-only, one JSON object per line, decoded: a record
as the user appended it, the protocol's own entries as what they hold.

  offset, epoch  the entry's offset and leader epoch
  time           the leader's append time, ms since the Unix epoch (0: unknown)
  type           the stored type: "data" or "keyed" (a user's record,
                 readers see it), "control", "voters" or "state" (the
                 protocol's, readers never see them)
  kind           what it is for: "record"; "epoch-start" (the first entry
                 of an epoch: its new leader's, or the epoch's first
                 barrier), "barrier" (Barrier, WaitReady, Cursor),
                 "control" (a control entry at the log start, where the
                 epoch map no longer tells which), "voter-set", "cursor"
                 (a CommitCursor), "key-copies" (the leader's copies of
                 live producer and ID records, kept above the log start)
  data           a record's bytes, base64 (as tail --json prints them)
  key            a keyed append's key, on its batch's last entry and on a
                 cursor commit: producer (16 hex digits), seq, low, id
                 (WithID), first and entries (the batch's offsets)
  voters, owed   a voter set, node/directory each, and whom it owes a place
  state          a state entry's records: {"kind":"cursor","name","next"},
                 {"kind":"producer",...} or {"kind":"id",...}
  raw, malformed an entry that does not decode: its stored bytes (base64)
                 and why

Without --from it starts at the log start, without --to it ends at the
LEO. Every entry's checksum is verified as it is read.

Exit status: 0 if every entry asked for was printed; 1 if the range is
outside the log (below its start or above its LEO), an entry is
damaged, or the directory could not be read.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			from := fs.String("from", "", "first offset (default: the log start)")
			to := fs.String("to", "", "offset after the last (default: the LEO)")
			timeout := fs.Duration("timeout", time.Second, "wait this long for the directory's lock")
			return func(ctx context.Context, e *env, args []string) error {
				dir, err := dirArg(args)
				if err != nil {
					return err
				}
				fromN, toN := optOffset("--from", *from), optOffset("--to", *to)
				for _, o := range []offsetArg{fromN, toN} {
					if o.err != nil {
						return o.err
					}
				}
				return dump(ctx, e, dir, *timeout, fromN, toN)
			}
		},
	})
}

// dirArg returns the one DIR argument.
func dirArg(args []string) (string, error) {
	if len(args) != 1 {
		return "", usageError("want one data directory, got %d arguments", len(args))
	}
	return args[0], nil
}

// offsetArg is an optional offset flag.
type offsetArg struct {
	v   uint64
	set bool
	err error
}

func optOffset(name, s string) offsetArg {
	if s == "" {
		return offsetArg{}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return offsetArg{err: usageError("%s %q is not an offset", name, s)}
	}
	return offsetArg{v: v, set: true}
}

// inspectReport is inspect's output (--json as it is).
type inspectReport struct {
	Dir          string                `json:"dir"`
	Identity     storage.Identity      `json:"identity"`
	LogStart     uint64                `json:"log_start"`
	LEO          uint64                `json:"leo"`
	Epochs       []protocol.EpochStart `json:"epochs"`
	VoterSets    []protocol.VotersAt   `json:"voter_sets"`
	HWCheckpoint *uint64               `json:"hw_checkpoint"` // null: none stored
	Quorum       protocol.QuorumState  `json:"quorum_state"`
	Segments     []storage.SegmentInfo `json:"segments"`
}

func inspect(e *env, dir string, timeout time.Duration, asJSON bool) error {
	s, id, err := openDir(dir, timeout)
	if err != nil {
		return err
	}
	defer s.Close()
	r := inspectReport{Dir: dir, Identity: id, LogStart: s.LogStart(), LEO: s.LEO(), Epochs: s.EpochMap(), VoterSets: s.VoterSets(), Segments: s.Segments()}
	if r.Quorum, err = s.QuorumState(); err != nil {
		return dirError(dir, timeout, err)
	}
	hw, ok, err := s.HWCheckpoint()
	if err != nil {
		return dirError(dir, timeout, err)
	}
	if ok {
		r.HWCheckpoint = &hw
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintf(w, "directory\t%s\n", dir)
	if id == (storage.Identity{}) {
		fmt.Fprintf(w, "identity\tnone (a directory from before identities)\n")
	} else {
		fmt.Fprintf(w, "identity\tcluster %q, node %q, directory %s\n", id.ClusterID, id.NodeID, id.DirectoryID)
	}
	fmt.Fprintf(w, "log start\t%d\n", r.LogStart)
	fmt.Fprintf(w, "LEO\t%d (log end offset: the next entry goes here)\n", r.LEO)
	fmt.Fprintf(w, "entries\t%d\n", r.LEO-r.LogStart)
	if r.HWCheckpoint != nil {
		fmt.Fprintf(w, "HW checkpoint\t%d (the high watermark last saved to disk; see below)\n", *r.HWCheckpoint)
	} else {
		fmt.Fprintf(w, "HW checkpoint\tnone saved yet (see below)\n")
	}
	fmt.Fprintf(w, "quorum state\tepoch %d, voted for %q, leader %q\n", r.Quorum.Epoch, r.Quorum.VotedFor, r.Quorum.LeaderID)
	fmt.Fprintf(w, "epochs\t%d (epoch: first offset)\n", len(r.Epochs))
	fmt.Fprintf(w, "voter sets\t%d (offset: node/directory, ...)\n", len(r.VoterSets))
	fmt.Fprintf(w, "segments\t%d (file, offsets, bytes)\n", len(r.Segments))
	if err := w.Flush(); err != nil {
		return err
	}
	// The tables after the fields, each aligned on its own.
	fmt.Fprintf(e.stdout, "\nepochs:\n")
	w = tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	for _, ep := range r.Epochs {
		fmt.Fprintf(w, "  %d\t%d\n", ep.Epoch, ep.StartOffset)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nvoter sets:\n")
	w = tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	for _, vs := range r.VoterSets {
		owes := ""
		if len(vs.Owed) > 0 {
			owes = " (owes " + strings.Join(voterNames(vs.Owed), ",") + ")"
		}
		fmt.Fprintf(w, "  %d\t%s%s\n", vs.Offset, strings.Join(voterNames(vs.Voters), ","), owes)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nsegments:\n")
	w = tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	for _, seg := range r.Segments {
		name := filepath.Base(seg.Path)
		if seg.Active {
			name += " (active)"
		}
		fmt.Fprintf(w, "  %s\t[%d, %d)\t%d\n", name, seg.Base, seg.End, seg.Bytes)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "\n%s\n", hwCheckpointNote)
	return err
}

// hwCheckpointNote explains the HW checkpoint: beside the LEO, a lower
// number looks like lost or uncommitted entries, and it is neither.
const hwCheckpointNote = `The HW checkpoint is the high watermark (the end of what is committed) as
this node last saved it. It is saved at most once a second, and only for
readers: the node does not wait for it to be on disk before it commits,
so it may lag the LEO, even after a clean shutdown. That is by design, not
lost data. On start the node serves reads up to the checkpoint, then
learns the real high watermark from its leader (or, as the leader, from
its followers' fetches); entries above the checkpoint are kept and are
never cut because of it.`

// voterNames renders a voter set as node/directory names.
func voterNames(vs []protocol.Voter) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID + "/" + v.DirID
	}
	return out
}

func dump(ctx context.Context, e *env, dir string, timeout time.Duration, from, to offsetArg) error {
	s, _, err := openDir(dir, timeout)
	if err != nil {
		return err
	}
	defer s.Close()
	logStart, leo := s.LogStart(), s.LEO()
	start, end := logStart, leo
	if from.set {
		start = from.v
	}
	if to.set {
		end = to.v
	}
	switch {
	case end < start:
		return usageError("--to %d is below --from %d", end, start)
	case start < logStart:
		return fmt.Errorf("--from %d is out of range: the log holds [%d, %d); the entries below %d were deleted (retention or DeleteBefore)", start, logStart, leo, logStart)
	case end > leo:
		return fmt.Errorf("--to %d is out of range: the log holds [%d, %d) (--to is the offset after the last to print)", end, logStart, leo)
	}
	epochs := newEpochStarts(s.EpochMap(), logStart)
	enc := json.NewEncoder(e.stdout)
	for off := start; off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		es, err := s.Entries(off, int(min(end-off, 10_000)), 16<<20)
		if err != nil {
			return dirError(dir, timeout, err)
		}
		if len(es) == 0 {
			return fmt.Errorf("data directory %s is damaged: no entry at offset %d, below its LEO %d", dir, off, leo)
		}
		for _, en := range es {
			if err := enc.Encode(decodeEntry(en, epochs)); err != nil {
				return err
			}
		}
		off += uint64(len(es))
	}
	return nil
}
