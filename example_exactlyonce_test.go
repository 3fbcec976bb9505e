package replog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/replog-io/replog"
)

// An exactly-once pipeline: read a committed input, append its result
// with an ID derived from the input's offset, then commit the cursor. A
// crash anywhere re-does at most the inputs after the last cursor commit,
// and their results are deduplicated by ID (within Options.DedupWindow):
// every input's result is in the log exactly once. Here the first run
// "crashes" after appending the second result, before committing the
// cursor past it; the second run resumes from the cursor.
func ExampleLog_CommitCursor() {
	dir, err := os.MkdirTemp("", "replog-pipeline")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, in := range []string{"in:a", "in:b", "in:c"} {
		if _, err := l.Append(ctx, []byte(in)); err != nil {
			log.Fatal(err)
		}
	}

	// run processes inputs from the cursor on; it stops after limit
	// results, before committing the last one's cursor (the "crash").
	run := func(limit int) {
		from, err := l.Cursor(ctx, "upper")
		if errors.Is(err, replog.ErrNoCursor) {
			from, err = 0, nil
		}
		if err != nil {
			log.Fatal(err)
		}
		st := l.Status()
		done := 0
		for e, err := range l.ReadRange(ctx, from, st.HighWatermark) {
			if err != nil {
				log.Fatal(err)
			}
			in, ok := bytes.CutPrefix(e.Data, []byte("in:"))
			if !ok {
				continue // an output, not an input
			}
			out := append([]byte("out:"), bytes.ToUpper(in)...)
			id := "upper-" + strconv.FormatUint(e.Offset, 10)
			_, err := l.Append(ctx, out, replog.WithID(id))
			if errors.Is(err, replog.ErrDuplicate) {
				fmt.Printf("%s: already done\n", in)
			} else if err != nil {
				log.Fatal(err)
			}
			if done++; done == limit {
				return // crash before the cursor commit
			}
			if err := l.CommitCursor(ctx, "upper", e.Offset+1); err != nil {
				log.Fatal(err)
			}
		}
	}
	run(2)
	run(-1)

	for e, err := range l.ReadRange(ctx, 0, l.Status().HighWatermark) {
		if err != nil {
			log.Fatal(err)
		}
		if bytes.HasPrefix(e.Data, []byte("out:")) {
			fmt.Printf("%s\n", e.Data)
		}
	}
	// Output:
	// b: already done
	// out:A
	// out:B
	// out:C
}
