package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DirOptions configures OpenDir (and OpenDirReadOnly, which reads Timeout
// and Logger). The zero value is usable: zero fields take the defaults
// named on each.
type DirOptions struct {
	// NoSync skips fsync at commit. Writes then survive a process crash (they
	// are in the page cache) but not a machine crash or power loss: a
	// NoSync store may lose acknowledged writes and must not be used where
	// durability matters. For tests and benchmarks only. Default false.
	NoSync bool
	// Timeout is how long OpenDir and OpenDirReadOnly wait for the
	// directory's lock (and a segment file's) before ErrLocked. Default
	// DefaultLockTimeout (1s); negative is invalid.
	Timeout time.Duration
	// Logger receives the store's log lines. Default: a null logger. It is
	// used as given: name it (Named("storage")) before passing it.
	Logger hclog.Logger
	// SegmentBytes is the size at which OpenDir's store rolls its active
	// segment file: the first Apply that appends once the active file
	// holds SegmentBytes or more (bbolt's pages in use) seals it and starts
	// a new one, so a segment may exceed it by one Apply. Retention deletes
	// whole segments, so it is also the granularity of deletion. Default
	// DefaultSegmentBytes (64 MiB); negative is invalid; values of a few
	// KiB roll at almost every append (tests); a value larger than the log
	// keeps it in one file. See docs/storage.md.
	SegmentBytes int64
	// Journal puts the commit journal in front of the segment files
	// (storage format 2, docs/storage.md section 10): an Apply is durable
	// after one write and one fdatasync of a preallocated journal file,
	// and the segments take its writes in the background. A node turns it
	// on only once every node of its cluster reads format 2 (the cluster's
	// feature level). Opening a format 2 directory with it off moves the
	// journal's writes into the segments, removes the journal and records
	// format 1. Default false.
	Journal bool
	// JournalBytes is the journal file's size (preallocated). A checkpoint
	// starts when a quarter of it holds writes not yet in the segments;
	// when it is full, Apply waits for the checkpoint; an Apply whose
	// record needs more than half of it goes to the segments directly
	// (after the journal's). Open reads the whole file. It applies when
	// the journal is created: an existing journal keeps its size. Default
	// DefaultJournalBytes (8 MiB); below 64 KiB (other than 0) is invalid.
	JournalBytes int64
	// SharedJournal, if not nil, is the commit journal the store writes
	// to instead of a journal of its own (OpenJournal): the Applies of
	// every store on it that wait at the same moment share one write and
	// one fdatasync. The directory is then storage format 3 (it names
	// the journal and its log ID in JournalRefFileName) and opens only
	// with that journal and log ID; Journal and JournalBytes do not
	// apply. Read-only opens do not take it. Default nil.
	SharedJournal *Journal
	// JournalLogID is the store's log ID on SharedJournal: each store on
	// a journal has its own, the same at every open (the directory
	// records it). Default 0; 1<<32-1 is reserved.
	JournalLogID uint32
}

// DefaultJournalBytes is DirOptions.JournalBytes's default.
const DefaultJournalBytes = 8 << 20

// DefaultLockTimeout is DirOptions.Timeout's default.
const DefaultLockTimeout = time.Second

// DefaultSegmentBytes is DirOptions.SegmentBytes's default.
const DefaultSegmentBytes = 64 << 20

// ErrInvalidOptions wraps every DirOptions.Validate error.
var ErrInvalidOptions = errors.New("replog: invalid storage options")

// EnsureDefaults sets o's zero fields to their defaults (named on each
// field). OpenDir calls it on its own copy.
func (o *DirOptions) EnsureDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultLockTimeout
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.JournalBytes == 0 {
		o.JournalBytes = DefaultJournalBytes
	}
}

// Validate reports the first invalid field of o, as an error wrapping
// ErrInvalidOptions that names it ("DirOptions.Timeout"). It does not
// modify o.
func (o DirOptions) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("%w: DirOptions.Timeout is negative (%v)", ErrInvalidOptions, o.Timeout)
	}
	if o.SegmentBytes < 0 {
		return fmt.Errorf("%w: DirOptions.SegmentBytes is negative (%d)", ErrInvalidOptions, o.SegmentBytes)
	}
	if o.JournalBytes != 0 && o.JournalBytes < minJournalBytes {
		return fmt.Errorf("%w: DirOptions.JournalBytes is %d, below the minimum %d", ErrInvalidOptions, o.JournalBytes, minJournalBytes)
	}
	if o.JournalLogID == journalMultiLog {
		return fmt.Errorf("%w: DirOptions.JournalLogID %d is reserved", ErrInvalidOptions, o.JournalLogID)
	}
	return nil
}
