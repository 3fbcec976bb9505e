package replica

import (
	"math/rand"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Config configures a Replica. Zero durations and sizes take the defaults
// named on each field.
type Config struct {
	// ID is this node's ID. Required.
	ID string
	// Voters is the fixed list of voter IDs. If ID is not in it, the replica
	// is an observer. Required (non-empty).
	Voters []string
	// FetchTimeout: a voter that has had no successful fetch for this long
	// becomes prospective; a leader that has not had fetches from a majority
	// within it resigns (check-quorum). Default 2s.
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
	// of it to FetchTimeout. Default 500ms.
	ElectionTimeout time.Duration
	// FetchMaxWait is how long a leader parks a fetch that finds nothing
	// (Kafka's replica.fetch.wait.max.ms). Default 500ms.
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds the entry bytes of one fetch response (the first
	// entry is always sent whole). Default 1 MiB.
	FetchMaxBytes int
	// MaxRecordSize bounds one record's size; larger proposals fail with
	// ErrTooLarge. Default 1 MiB.
	MaxRecordSize int
	// Rand drives every random choice (timeouts). Required for determinism;
	// if nil, a source seeded from ID is used.
	Rand *rand.Rand
	// Logger receives the core's logs. Default: a null logger.
	Logger hclog.Logger
}

// Defaults for zero Config fields.
const (
	DefaultFetchTimeout    = 2 * time.Second
	DefaultElectionTimeout = 500 * time.Millisecond
	DefaultFetchMaxWait    = 500 * time.Millisecond
	DefaultFetchMaxBytes   = 1 << 20
	DefaultMaxRecordSize   = 1 << 20
)

// MinFetchTimeout is the smallest FetchTimeout that goes with fetchMaxWait
// and electionTimeout: 2*(fetchMaxWait+electionTimeout), the longest a
// follower can go without leader contact when one fetch or its answer is
// lost (see Config.FetchTimeout).
func MinFetchTimeout(fetchMaxWait, electionTimeout time.Duration) time.Duration {
	return 2 * (fetchMaxWait + electionTimeout)
}
