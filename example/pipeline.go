package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/replog-io/replog"
)

// pipelineLog is what the pipeline needs from a replog node.
type pipelineLog interface {
	Read(ctx context.Context, from uint64) iter.Seq2[replog.Entry, error]
	Append(ctx context.Context, data []byte, opts ...replog.AppendOption) (uint64, error)
	CommitCursor(ctx context.Context, name string, next uint64) error
	Cursor(ctx context.Context, name string) (uint64, error)
}

// pipeline is -pipeline FROM=TO: an exactly-once consumer beside the
// node. It reads the committed log from its cursor, appends every record
// that starts with from again with to in its place, under an ID derived
// from the input's offset (replog.WithID), and commits the cursor past
// it. Killed anywhere and started again, it resumes from the committed
// cursor and redoes at most the record after it, whose output the log
// recognises by its ID (within replog's DedupWindow): every input's
// output is in the log exactly once.
type pipeline struct {
	log      pipelineLog
	from, to []byte
	// cursor names the pipeline's position and prefixes its IDs, so two
	// pipelines with different names do not take each other's outputs for
	// duplicates.
	cursor string
	logger hclog.Logger
	// retry is the pause after a failed pass.
	retry time.Duration
}

// parsePipeline parses -pipeline's FROM=TO.
func parsePipeline(v string) (from, to string, err error) {
	from, to, ok := strings.Cut(v, "=")
	if !ok || from == "" || strings.HasPrefix(to, from) {
		return "", "", fmt.Errorf("-pipeline %q: want FROM=TO, FROM not empty and not a prefix of TO (the outputs would be inputs again)", v)
	}
	return from, to, nil
}

// id is the output's ID for the input at offset.
func (p *pipeline) id(offset uint64) string {
	return p.cursor + "/" + strconv.FormatUint(offset, 10)
}

// run runs passes until ctx ends, pausing after a failed one.
func (p *pipeline) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := p.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		p.logger.Warn("pipeline pass ended; resuming from the cursor", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(p.retry):
		}
	}
}

// pass resumes from the committed cursor (the log start if it was never
// committed) and processes entries until an error or ctx ends.
func (p *pipeline) pass(ctx context.Context) error {
	next, err := p.log.Cursor(ctx, p.cursor)
	if errors.Is(err, replog.ErrNoCursor) {
		next, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("reading cursor %s: %w", p.cursor, err)
	}
	p.logger.Info("pipeline resumes", "cursor", p.cursor, "next", next)
	for e, err := range p.log.Read(ctx, next) {
		var oor *replog.OutOfRangeError
		if errors.As(err, &oor) {
			// Retention deleted inputs this pipeline never processed: say
			// so, loudly, and go on from the log start.
			p.logger.Error("pipeline inputs deleted by retention before they were processed", "from", next, "to", oor.LogStart-1)
			if err := p.log.CommitCursor(ctx, p.cursor, oor.LogStart); err != nil {
				return fmt.Errorf("committing cursor %s: %w", p.cursor, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		next = e.Offset + 1
		if !bytes.HasPrefix(e.Data, p.from) {
			continue
		}
		out := append(append([]byte(nil), p.to...), e.Data[len(p.from):]...)
		off, err := p.log.Append(ctx, out, replog.WithID(p.id(e.Offset)))
		switch {
		case errors.Is(err, replog.ErrDuplicate):
			p.logger.Info("pipeline output already appended", "input", e.Offset, "output", off)
		case err != nil:
			return fmt.Errorf("appending the output of %d: %w", e.Offset, err)
		}
		if err := p.log.CommitCursor(ctx, p.cursor, next); err != nil {
			return fmt.Errorf("committing cursor %s at %d: %w", p.cursor, next, err)
		}
	}
	return ctx.Err()
}
