package replica

import (
	"fmt"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// The cluster feature level (docs/protocol.md R68; Kafka's
// metadata.version, etcd's cluster version). The log's EntryFeature
// entries record it; it is finalized once committed. A leader raises it
// on its own to the highest level that every voter and every observer it
// hears from supports, within Config.MaxFeatureLevel, and never lowers
// it. Until it is raised, every node may go back to the previous release:
// nothing that needs the level is written. What each replica supports
// reaches the leader with its fetches (FetchRequest.FeatureLevel), so the
// core decides on its inputs alone.

// levelRow is one EntryFeature entry of the log: the level from off on.
type levelRow struct {
	off   uint64
	level int
}

// applyLevel records an EntryFeature entry. One that does not decode is
// skipped, loudly: no leader writes it, and reading it as a level would
// be a guess.
func (t *keyTable) applyLevel(e *protocol.Entry, logger interface{ Warn(string, ...any) }) {
	l, err := protocol.DecodeFeatureLevel(e.Data)
	if err != nil {
		logger.Warn("malformed feature level entry", "offset", e.Offset, "error", err)
		return
	}
	t.levels = append(t.levels, levelRow{off: e.Offset, level: int(l)})
}

// levelSeen is a level a replica's fetch said, and when.
type levelSeen struct {
	level int
	at    time.Time
}

// noteFetchLevel records that from's fetch says it supports l: it replaces
// what was recorded if it is no higher, or if that is older than
// FetchTimeout.
func (r *Replica) noteFetchLevel(from string, l int) {
	ls := r.leader
	if cur, ok := ls.fetchLevel[from]; !ok || l <= cur.level || r.now.Sub(cur.at) >= r.cfg.FetchTimeout {
		ls.fetchLevel[from] = levelSeen{level: l, at: r.now}
	}
}

// logLevel is the level of the newest EntryFeature entry of the log,
// committed or not (what a leader would append next must be above it).
func (r *Replica) logLevel() int {
	if n := len(r.keys.levels); n > 0 {
		return max(r.keys.levels[n-1].level, r.level)
	}
	return r.level
}

// committedLevelRow returns the newest EntryFeature entry below the HW.
func (r *Replica) committedLevelRow() (levelRow, bool) {
	rows := r.keys.levels
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].off < r.hw {
			return rows[i], true
		}
	}
	return levelRow{}, false
}

// checkFeatureLevel runs in every Ready: the finalized level follows the
// HW, and one above what this replica supports halts it (R68). Entries
// past such a level may use kinds or formats it cannot read: halting is
// the only way not to misread them.
func (r *Replica) checkFeatureLevel() {
	row, ok := r.committedLevelRow()
	if !ok || row.level <= r.level {
		return
	}
	if row.level > r.cfg.SupportedFeatureLevel {
		r.halt(fmt.Errorf("%w: the log committed level %d at offset %d; this node supports %d..%d",
			ErrFeatureLevel, row.level, row.off, protocol.MinVersion, r.cfg.SupportedFeatureLevel))
		return
	}
	r.logger.Info("cluster feature level finalized", "level", row.level, "offset", row.off)
	r.level = row.level
}

// raiseFeatureLevel is the leader's part of R68: it appends an
// EntryFeature entry raising the level to the highest one that this
// leader, every voter of the set in force and every replica fetching
// from it now support, if that is above the log's, within
// Config.MaxFeatureLevel. A voter it has not heard from within
// FetchTimeout in this epoch (or only from another directory) may run
// any release: no raise then. Nor in the first FetchTimeout of a
// leadership: an observer that fetched from the previous leader needs
// that long to find this one and be heard. A node that fetches from no
// leader is not known, and learns the level when it joins (or halts, if
// it cannot run at it). Nothing is appended before the key table has read
// the whole log (the log's level is not known until then), during a
// transfer, or in the bootstrap set.
func (r *Replica) raiseFeatureLevel() {
	if r.bootstrap || r.transferring() || r.keys.applied < r.log.LEO() ||
		r.now.Sub(r.leader.since) < r.cfg.FetchTimeout && !bugs.LevelIgnoresPeers {
		return
	}
	target := r.cfg.SupportedFeatureLevel
	if c := r.cfg.MaxFeatureLevel; c > 0 {
		target = min(target, c)
	}
	cur := r.logLevel()
	if target <= cur {
		return
	}
	ls := r.leader
	if !bugs.LevelIgnoresPeers {
		for _, v := range r.voters {
			if v == r.id {
				continue
			}
			if !r.levelReportStands(v) || !r.isVoterDir(v, ls.fetchDir[v]) {
				return // not known: it may run the previous release
			}
			target = min(target, ls.fetchLevel[v].level)
		}
		for id, dir := range ls.fetchDir {
			if id == r.id || !r.fetchingNow(id) || r.isVoterDir(id, dir) {
				continue
			}
			if !r.levelReportStands(id) {
				return // an observer that hung up: it may be restarting into the previous release
			}
			target = min(target, ls.fetchLevel[id].level) // an observer
		}
	}
	if target <= cur {
		return
	}
	r.logger.Info("raising the cluster feature level", "from", cur, "to", target)
	r.appendLevel(target)
}

// levelReportStands reports whether the level id's last fetch reported
// still speaks for id: it fetched within FetchTimeout and no connection of
// it closed since (R69's PeerDown). A node that hung up after reporting may
// be restarting into the previous release; its next fetch says which.
func (r *Replica) levelReportStands(id string) bool {
	if !r.fetchingNow(id) {
		return false
	}
	closed, ok := r.closedAt[id]
	return !ok || closed.Before(r.leader.anyFetch[id])
}

// appendLevel appends an EntryFeature entry of level l at the LEO.
func (r *Replica) appendLevel(l int) {
	r.appendEntries([]protocol.Entry{{Offset: r.log.LEO(), Epoch: r.epoch, Time: r.now.UnixMilli(),
		Type: protocol.EntryFeature, Data: protocol.EncodeFeatureLevel(uint8(l))}})
}

// keepFeatureLevel is R68's part of a leader's deletion up to upTo (with
// R66's bound so far): the newest committed EntryFeature entry stays at or
// above the log start until a copy of it above upTo has committed, which
// it appends if there is none yet. A replica that resets to the log start
// or rebuilds its table after a restart reads the level from the log it
// holds, so the level must never go below the log start.
func (r *Replica) keepFeatureLevel(upTo, bound uint64) uint64 {
	row, ok := r.committedLevelRow()
	if !ok || row.off >= upTo {
		return bound
	}
	if newest := r.keys.levels[len(r.keys.levels)-1]; newest.off < upTo && !r.transferring() {
		r.appendLevel(newest.level)
	}
	return min(bound, row.off)
}
