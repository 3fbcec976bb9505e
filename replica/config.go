package replica

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
)

// Config configures a Replica. Zero durations and sizes take the defaults
// named on each field (EnsureDefaults); Validate checks the rest. New
// applies both to its own copy: the caller's Config is never modified.
type Config struct {
	// ID is this node's ID. Required.
	ID string
	// DirID is the directory ID of this node's store (storage.Identity's
	// DirectoryID): a voter is a node ID and a directory ID, so a node whose
	// directory was wiped, which comes back with another DirID, is not
	// counted as its old self (docs/protocol.md R56). Default: ID (for tests
	// and in-memory stores; a real shell always sets it).
	DirID string
	// Voters is the bootstrap voter set: the voters of a cluster whose log
	// holds no voter set yet (a brand-new one). Afterwards the voter sets
	// in the log are the truth (R55). Required (non-empty).
	Voters []string
	// Members are the other nodes membership knows of at start (gossip
	// members after the join, static peers), voters or not; HintMember
	// adds those it learns of later. A replica whose log holds no voter
	// set asks each of them, with Voters, whether a cluster exists before
	// it bootstraps one, and bootstraps nothing if any says so (R60): a
	// wiped node whose Voters name only fresh stores must join the cluster
	// that exists, not start a second one. Optional.
	Members []string
	// Name is the log's name ("" for a node's default log and for a log
	// opened alone). It picks which voter stands first when the leader's
	// connection closes (R106): logs with other names have their
	// successors on other nodes, so that a node's death leaves one
	// election per log, spread over the survivors. Optional.
	Name string
	// FirstCandidate, if not empty, is the bootstrap voter that campaigns
	// for the log's first leader at once (R108): while the replica's log
	// holds no voter set and it knows no leader, its first pre-vote round
	// starts at New if it is FirstCandidate, and an ElectionTimeout later
	// than it otherwise would (R60) if it is another voter, which leaves
	// the first round to FirstCandidate. A Node sets it to a named log's
	// preferred leader, so that a new log has a leader within a few round
	// trips of its replicas opening. Optional; when empty, or not one of
	// Voters, every replica's first round starts a random part of
	// ElectionTimeout after New.
	FirstCandidate string
	// ManualVoterChanges turns off the automatic replacement of a voter
	// that came back with a new directory (R58): the new incarnation then
	// stays an observer until an operator removes the old one and adds it.
	ManualVoterChanges bool
	// ShipSnapshots says that the shell keeps a snapshot store and carries
	// out Ready.SnapshotChunks (reporting with SnapshotProgress): at
	// protocol.FeatureLevelSnapshotTransfer a follower below its leader's
	// log start then pulls the leader's snapshot before it resets (R92).
	// Default false: it resets at once (R53). A leader answers snapshot
	// requests either way (Ready.SnapshotReads).
	ShipSnapshots bool
	// FetchTimeout: a voter that has had no successful fetch for this long
	// becomes prospective; a leader that has not had fetches from a majority
	// within it resigns (check-quorum). Default 700ms.
	//
	// It must be at least 2*(FetchMaxWait+ElectionTimeout), so that one lost
	// fetch or answer never costs leader contact: a follower's next fetch
	// leaves when the previous answer arrives (contact at c) and may be
	// parked for FetchMaxWait; if it or its answer is lost, the follower
	// retries at c+FetchMaxWait+ElectionTimeout (its retry timeout: parking
	// plus a round trip, which ElectionTimeout covers), and the retry is
	// answered within another FetchMaxWait plus a round trip, so contact
	// resumes by c+2*(FetchMaxWait+ElectionTimeout). A shorter FetchTimeout
	// makes voters flap after a single lost message.
	FetchTimeout time.Duration
	// ElectionTimeout is the base of the randomised election timeouts: a
	// prospective or candidate replica retries after a random time in
	// [ElectionTimeout, 2*ElectionTimeout), and followers add a random part
	// of it to FetchTimeout. Default 200ms.
	ElectionTimeout time.Duration
	// FetchMaxWait is how long a leader parks a fetch that finds nothing
	// (Kafka's replica.fetch.wait.max.ms). Default 150ms: an idle
	// follower fetches about 7 times a second.
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds the entry bytes of one fetch response (the first
	// entry is always sent whole). Default 1 MiB.
	FetchMaxBytes int
	// MaxRecordSize bounds one record's size; larger proposals fail with
	// ErrTooLarge. Default 1 MiB.
	MaxRecordSize int
	// MaxForwardBytes bounds a batch a follower forwards to the leader
	// (its records plus protocol.EntryOverhead each), so that the request
	// fits the shell's transport; larger batches fail with ErrTooLarge
	// before anything is sent. The shell sets it from its transport's frame
	// limit (the root package: transport.DefaultMaxPayload). Default 8 MiB.
	// MaxRecordSize+protocol.EntryOverhead must fit in it (Validate).
	MaxForwardBytes int
	// CatchUpBytesPerSecond is the leader's replication quota
	// (docs/protocol.md R73): the entry bytes per second it serves, all
	// together, to fetchers catching up (fetching below its HW) that the
	// HW does not need: observers, and voters without which a majority is
	// still in step. Fetches over it wait (up to their MaxWait, then are
	// answered without entries). Fetchers in step, and a voter the HW
	// needs, are never throttled. Default DefaultCatchUpBytesPerSecond;
	// negative: no quota.
	CatchUpBytesPerSecond int
	// MaxUncommittedBytes bounds the leader's uncommitted backlog
	// (docs/protocol.md R74): the bytes (len(Data)+protocol.EntryOverhead
	// each) of the data entries it appended in its epoch that are not
	// yet committed. A data proposal that would take the backlog over it
	// is refused with ErrBacklogFull, nothing appended (a forwarded one is
	// answered not-leader naming the leader itself); one arriving while
	// the backlog is empty is appended whatever its size. Default
	// DefaultMaxUncommittedBytes; negative: no bound.
	MaxUncommittedBytes int
	// DedupWindow is how long a leader remembers a caller-supplied ID: an
	// append carrying an ID appended within it is not appended again (R64;
	// NATS JetStream's duplicate window). Default 2 minutes.
	DedupWindow time.Duration
	// ProducerIdleTimeout is how long a leader remembers a producer that
	// appends nothing (R66; Kafka's producer.id.expiration.ms): a retry
	// that comes later than this after its producer's last append may be
	// appended again. Default 24 hours.
	ProducerIdleTimeout time.Duration
	// SupportedFeatureLevel is the highest cluster feature level this node
	// can run at (docs/protocol.md R68): the newest wire version its code
	// speaks. It is sent with every fetch, for the leader's decision to
	// raise the level, and a committed level above it halts the node
	// (ErrFeatureLevel). Default protocol.Version. Only a test sets it
	// (the simulation runs nodes of two releases on one core this way).
	SupportedFeatureLevel int
	// MaxFeatureLevel holds the cluster's feature level: as leader, this
	// node raises it no higher (R68). 0 (the default) raises it as far as
	// every node supports; protocol.BaseFeatureLevel keeps a cluster at the
	// level it started at, so that any node can still go back to the
	// previous release. Never lowers a level already raised.
	MaxFeatureLevel int
	// KeyCheckpointBytes is how much log (entry bytes, as keyCatchUpBytes
	// counts them) the keyed-state table applies between two checkpoints
	// of it (Ready.KeyCheckpoint, R76): a restart replays at most about
	// this much of the log to rebuild the table. Default
	// DefaultKeyCheckpointBytes; negative: never.
	KeyCheckpointBytes int
	// Contact is the node's contact with its peers (docs/protocol.md R98):
	// when it last heard anything from each. With it, at
	// FeatureLevelQuiescence, a caught-up follower quiesces its fetch and
	// a leader parks a quiescent fetch without a deadline (R99). nil (the
	// default): this replica never quiesces, and parks a quiescent fetch
	// as any other (a follower then goes on fetching every FetchMaxWait).
	Contact PeerContact
	// Rand drives every random choice (timeouts). Required for determinism;
	// if nil, a source seeded from ID is used.
	Rand *rand.Rand
	// Logger receives the core's logs. Default: a null logger.
	Logger hclog.Logger
}

// Defaults for zero Config fields. The three timings meet R49 exactly
// (700ms = 2*(150ms+200ms)): a silent leader is replaced FetchTimeout plus
// a random part of ElectionTimeout after its followers last heard from it,
// 0.7 to 0.9s (a closed connection starts it sooner, R69), and an idle
// follower fetches 1/FetchMaxWait times a second.
const (
	DefaultFetchTimeout    = 700 * time.Millisecond
	DefaultElectionTimeout = 200 * time.Millisecond
	DefaultFetchMaxWait    = 150 * time.Millisecond
	DefaultFetchMaxBytes   = 1 << 20
	DefaultMaxRecordSize   = 1 << 20
	DefaultMaxForwardBytes = 8 << 20
	// DefaultCatchUpBytesPerSecond lets a follower catch up at tens of
	// MB/s while leaving the leader's disk and CPU to its commit path.
	DefaultCatchUpBytesPerSecond = 32 << 20
	// DefaultMaxUncommittedBytes is a few seconds of a busy leader's
	// appends: enough never to bind a healthy cluster, small enough that
	// a stuck one does not fill memory.
	DefaultMaxUncommittedBytes = 64 << 20
	// DefaultDedupWindow is JetStream's default duplicate window.
	DefaultDedupWindow = 2 * time.Minute
	// DefaultProducerIdleTimeout is Kafka's producer.id.expiration.ms
	// (KIP-854): longer than any append keeps retrying, and a producer costs
	// about 100 bytes (docs/protocol.md R66).
	DefaultProducerIdleTimeout = 24 * time.Hour
	// DefaultKeyCheckpointBytes bounds a restart's replay of the log for
	// the keyed-state table to four catch-up rounds (R76), while a table
	// of 10k live producers, checkpointed, costs its ~1 MB write once per
	// 16 MiB of log.
	DefaultKeyCheckpointBytes = 16 << 20
)

// MaxCatchUpBytesPerSecond bounds a positive Config.CatchUpBytesPerSecond
// (1 TiB/s, far above any disk): the quota's token arithmetic stays within
// int64.
const MaxCatchUpBytesPerSecond = 1 << 40

// MinFetchTimeout is the smallest FetchTimeout that goes with fetchMaxWait
// and electionTimeout: 2*(fetchMaxWait+electionTimeout), the longest a
// follower can go without leader contact when one fetch or its answer is
// lost (see Config.FetchTimeout).
func MinFetchTimeout(fetchMaxWait, electionTimeout time.Duration) time.Duration {
	return 2 * (fetchMaxWait + electionTimeout)
}

// EnsureDefaults sets every zero optional field of c to its default: the
// Default* constants, a Rand seeded from ID (so that a node's random
// choices are the same in every run), a null Logger. Fields already set are
// left alone; invalid values are Validate's business.
func (c *Config) EnsureDefaults() {
	if c.FetchTimeout == 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = DefaultMaxRecordSize
	}
	if c.MaxForwardBytes == 0 {
		c.MaxForwardBytes = DefaultMaxForwardBytes
	}
	if c.DirID == "" {
		c.DirID = c.ID
	}
	if c.CatchUpBytesPerSecond == 0 {
		c.CatchUpBytesPerSecond = DefaultCatchUpBytesPerSecond
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = DefaultMaxUncommittedBytes
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.ProducerIdleTimeout == 0 {
		c.ProducerIdleTimeout = DefaultProducerIdleTimeout
	}
	if c.KeyCheckpointBytes == 0 {
		c.KeyCheckpointBytes = DefaultKeyCheckpointBytes
	}
	if c.SupportedFeatureLevel == 0 {
		c.SupportedFeatureLevel = protocol.Version
	}
	if c.Rand == nil {
		h := fnv.New64a()
		h.Write([]byte(c.ID))
		c.Rand = rand.New(rand.NewSource(int64(h.Sum64())))
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// Validate checks c as New would use it (zero optional fields count as
// their defaults; c is not modified). The error is a *ConfigError naming
// the first bad field and wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c.EnsureDefaults() // on the copy
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if c.ID == "" {
		return bad("ID", "is required")
	}
	if len(c.Voters) == 0 {
		return bad("Voters", "is required (at least one voter)")
	}
	sorted := slices.Clone(c.Voters)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(c.Voters) || slices.Contains(c.Voters, "") {
		return bad("Voters", "%v must be distinct, non-empty IDs", c.Voters)
	}
	if c.ElectionTimeout < 0 {
		return bad("ElectionTimeout", "must be positive, not %v", c.ElectionTimeout)
	}
	if c.FetchMaxWait < 0 || c.FetchMaxWait > math.MaxUint32*time.Millisecond {
		// A fetch carries it in whole milliseconds, as a uint32.
		return bad("FetchMaxWait", "must be in (0, %v], not %v", math.MaxUint32*time.Millisecond, c.FetchMaxWait)
	}
	if min := MinFetchTimeout(c.FetchMaxWait, c.ElectionTimeout); c.FetchTimeout < min {
		return bad("FetchTimeout", "%v must be at least 2*(FetchMaxWait %v + ElectionTimeout %v) = %v (one lost fetch must not cost leader contact)",
			c.FetchTimeout, c.FetchMaxWait, c.ElectionTimeout, min)
	}
	if c.DedupWindow < 0 {
		return bad("DedupWindow", "must be positive, not %v", c.DedupWindow)
	}
	if c.ProducerIdleTimeout < 0 {
		return bad("ProducerIdleTimeout", "must be positive, not %v", c.ProducerIdleTimeout)
	}
	if c.FetchMaxBytes < 0 {
		return bad("FetchMaxBytes", "must be positive, not %d", c.FetchMaxBytes)
	}
	if c.MaxRecordSize < 0 {
		return bad("MaxRecordSize", "must be positive, not %d", c.MaxRecordSize)
	}
	if c.MaxForwardBytes < 0 {
		return bad("MaxForwardBytes", "must be positive, not %d", c.MaxForwardBytes)
	}
	if c.CatchUpBytesPerSecond > MaxCatchUpBytesPerSecond {
		return bad("CatchUpBytesPerSecond", "must be at most %d (or negative: no quota), not %d", MaxCatchUpBytesPerSecond, c.CatchUpBytesPerSecond)
	}
	if c.SupportedFeatureLevel < protocol.BaseFeatureLevel || c.SupportedFeatureLevel > math.MaxUint8 {
		return bad("SupportedFeatureLevel", "must be in [%d, %d], not %d", protocol.BaseFeatureLevel, math.MaxUint8, c.SupportedFeatureLevel)
	}
	if c.MaxFeatureLevel != 0 && (c.MaxFeatureLevel < protocol.BaseFeatureLevel || c.MaxFeatureLevel > math.MaxUint8) {
		return bad("MaxFeatureLevel", "must be 0 (no hold) or in [%d, %d], not %d", protocol.BaseFeatureLevel, math.MaxUint8, c.MaxFeatureLevel)
	}
	if c.MaxRecordSize > c.MaxForwardBytes-protocol.EntryOverhead {
		// A record a follower could never forward would append on the
		// leader only: one limit for both.
		return bad("MaxRecordSize", "%d must be at most MaxForwardBytes %d - protocol.EntryOverhead %d", c.MaxRecordSize, c.MaxForwardBytes, protocol.EntryOverhead)
	}
	return nil
}

// ConfigError is Validate's error: it names the bad field of Config.
type ConfigError struct {
	// Field is the bad field's name in Config ("FetchTimeout").
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s %s", ErrInvalidConfig, e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }
