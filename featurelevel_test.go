package replog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestStatusFeatureLevel (R68): Status reports the finalized cluster
// feature level and this node's supported range, in Go and in JSON. This
// release supports level 9 (protocol.Version), so a single node raises its
// cluster to 9 on its own (after leading for FetchTimeout); held at 7 it
// raises it to 7
// only (the journal, without pipelined fetches); held at the base level it
// stays there (no level entry is written).
func TestStatusFeatureLevel(t *testing.T) {
	for _, c := range []struct{ hold, want int }{
		{0, protocol.Version}, {protocol.FeatureLevelJournal, protocol.FeatureLevelJournal}, {protocol.BaseFeatureLevel, protocol.BaseFeatureLevel},
	} {
		l := openSingle(t, Options{MaxFeatureLevel: c.hold})
		if _, err := l.Append(context.Background(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if c.want > protocol.BaseFeatureLevel {
			waitFor(t, "the level raised", 10*time.Second, func() bool { return l.Status().FeatureLevel == c.want })
		} else {
			// Three FetchTimeouts (the default's 700ms): a raise would
			// have come after one.
			time.Sleep(2100 * time.Millisecond)
			if _, err := l.Append(context.Background(), []byte("y")); err != nil {
				t.Fatal(err)
			}
		}
		st := l.Status()
		if st.FeatureLevel != c.want || st.SupportedLevels != [2]int{protocol.MinVersion, protocol.Version} {
			t.Fatalf("hold %d: FeatureLevel %d, SupportedLevels %v; want %d and [%d %d]", c.hold, st.FeatureLevel, st.SupportedLevels,
				c.want, protocol.MinVersion, protocol.Version)
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), fmt.Sprintf(`"feature_level":%d`, c.want)) ||
			!strings.Contains(string(b), fmt.Sprintf(`"supported_levels":[%d,%d]`, protocol.MinVersion, protocol.Version)) {
			t.Fatalf("JSON status %s lacks the feature level fields", b)
		}
	}
}

// journalUse reports whether l's store commits through the journal: its
// data directory is format 2 and Stats counts journal bytes written since
// it opened (the tests run NoSync, so fsyncs do not show it).
func journalUse(t *testing.T, l *Log) (format int, bytes uint64) {
	t.Helper()
	f, err := storage.DirFormat(l.opts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return f, l.Stats().StorageJournalBytes
}

// TestFeatureLevelTurnsOnJournal (R68, level 7): a three-node cluster of
// this release raises its level to 9 (protocol.Version: with it the
// journal's 7 and pipelined fetches' 8) about FetchTimeout after its first
// leader took over, and then every node turns its commit journal on (the
// directory format 2, the writes through the journal); a restart opens
// format 2 with the journal and keeps every entry. Held at 6
// (MaxFeatureLevel), no node raises or turns it on.
func TestFeatureLevelTurnsOnJournal(t *testing.T) {
	t.Run("raised", func(t *testing.T) {
		c := newCluster(t, 3, nil)
		lead := c.leader(15 * time.Second)
		ctx, cancel := appendCtx(t)
		defer cancel()
		n := 0
		appendSome := func(k int) {
			for range k {
				if _, err := c.nodes[lead].Append(ctx, []byte(fmt.Sprintf("e%d", n))); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
		appendSome(5)
		waitFor(t, "this release's level on every node", 15*time.Second, func() bool {
			for _, l := range c.nodes {
				if l.Status().FeatureLevel != protocol.Version {
					return false
				}
			}
			return true
		})
		waitFor(t, "every node writing through its journal", 15*time.Second, func() bool {
			appendSome(1)
			for _, l := range c.nodes {
				if f, b := journalUse(t, l); f != storage.StorageFormatJournal || b == 0 {
					return false
				}
			}
			return true
		})
		// A follower restarts: format 2, opened with the journal.
		var fol string
		for id := range c.nodes {
			if id != lead {
				fol = id
				break
			}
		}
		if err := c.nodes[fol].Close(); err != nil {
			t.Fatal(err)
		}
		l := c.restart(fol)
		appendSome(3)
		readN(t, l, n, 15*time.Second)
		waitFor(t, "the restarted node writing through its journal", 15*time.Second, func() bool {
			f, b := journalUse(t, l)
			return f == storage.StorageFormatJournal && b > 0
		})
		if st := l.Status(); st.FeatureLevel != protocol.Version {
			t.Fatalf("restarted %s at level %d", fol, st.FeatureLevel)
		}
	})
	t.Run("held", func(t *testing.T) {
		c := newCluster(t, 3, func(_ string, o *Options) { o.MaxFeatureLevel = protocol.BaseFeatureLevel })
		lead := c.leader(15 * time.Second)
		ctx, cancel := appendCtx(t)
		defer cancel()
		for i := range 5 {
			if _, err := c.nodes[lead].Append(ctx, []byte(fmt.Sprintf("e%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		// Three FetchTimeouts (testOptions: 1s) of leading: a raise comes
		// after one.
		time.Sleep(3 * time.Second)
		if _, err := c.nodes[lead].Append(ctx, []byte("last")); err != nil {
			t.Fatal(err)
		}
		for id, l := range c.nodes {
			f, b := journalUse(t, l)
			if lv := l.Status().FeatureLevel; lv != protocol.BaseFeatureLevel || f != storage.StorageFormatSegments || b != 0 {
				t.Errorf("%s held at 6: level %d, format %d, %d journal bytes", id, lv, f, b)
			}
		}
	})
}
