package replog

import (
	"fmt"
	"time"
)

// LogOptions configures one named log of a Node (Node.CreateLog): the
// per-log subset of Options. Each field means what the Options field of
// the same name means, with the same default (the same constant), for
// this log alone; what is per node (addresses, secrets, TLS, gossip,
// timings, NoSync, Logger) comes from the Node's Options. The zero value
// is a log replicated on DefaultReplicas nodes with Options' defaults.
// The options are recorded in the catalog with the log: every replica
// runs the log with them.
type LogOptions struct {
	// Replicas is the replication factor: how many of the default log's
	// voters hold the log (its voters, chosen at creation, see
	// Node.CreateLog). Default DefaultReplicas (3), or every voter when
	// the cluster has fewer.
	Replicas int `json:"replicas,omitempty"`

	// RetentionBytes is Options.RetentionBytes for this log. Default 0:
	// keep everything.
	RetentionBytes int64 `json:"retention_bytes,omitempty"`
	// RetentionAge is Options.RetentionAge for this log. Default 0: off.
	RetentionAge time.Duration `json:"retention_age,omitempty"`
	// SegmentBytes is Options.SegmentBytes for this log. Default
	// storage.DefaultSegmentBytes (64 MiB).
	SegmentBytes int64 `json:"segment_bytes,omitempty"`
	// DedupWindow is Options.DedupWindow for this log. Default
	// DefaultDedupWindow.
	DedupWindow time.Duration `json:"dedup_window,omitempty"`
	// ProducerIdleTimeout is Options.ProducerIdleTimeout for this log.
	// Default DefaultProducerIdleTimeout.
	ProducerIdleTimeout time.Duration `json:"producer_idle_timeout,omitempty"`
	// MaxRecordSize is Options.MaxRecordSize for this log. Default
	// DefaultMaxRecordSize.
	MaxRecordSize int `json:"max_record_size,omitempty"`
	// FetchMaxBytes is Options.FetchMaxBytes for this log. Default
	// DefaultFetchMaxBytes.
	FetchMaxBytes int `json:"fetch_max_bytes,omitempty"`
	// CatchUpBytesPerSecond is Options.CatchUpBytesPerSecond for this
	// log: each log's leader has its own quota. Default
	// DefaultCatchUpBytesPerSecond; negative: no quota.
	CatchUpBytesPerSecond int `json:"catch_up_bytes_per_second,omitempty"`
	// MaxUncommittedBytes is Options.MaxUncommittedBytes for this log.
	// Default DefaultMaxUncommittedBytes; negative: no bound.
	MaxUncommittedBytes int `json:"max_uncommitted_bytes,omitempty"`
	// DisableIdempotence is Options.DisableIdempotence for this log.
	// Default false.
	DisableIdempotence bool `json:"disable_idempotence,omitempty"`
	// Compaction is Options.Compaction for this log. Default: off.
	Compaction Compaction `json:"compaction,omitzero"`
}

// DefaultReplicas is LogOptions.Replicas's default.
const DefaultReplicas = 3

// applyTo sets the per-log fields of o to lo's: every one, zero or not,
// so that a named log never inherits the default log's settings.
func (lo LogOptions) applyTo(o *Options) {
	o.RetentionBytes = lo.RetentionBytes
	o.RetentionAge = lo.RetentionAge
	o.SegmentBytes = lo.SegmentBytes
	o.DedupWindow = lo.DedupWindow
	o.ProducerIdleTimeout = lo.ProducerIdleTimeout
	o.MaxRecordSize = lo.MaxRecordSize
	o.FetchMaxBytes = lo.FetchMaxBytes
	o.CatchUpBytesPerSecond = lo.CatchUpBytesPerSecond
	o.MaxUncommittedBytes = lo.MaxUncommittedBytes
	o.DisableIdempotence = lo.DisableIdempotence
	o.Compaction = lo.Compaction
}

// replicas is the replication factor lo asks for among voters voters.
func (lo LogOptions) replicas(voters int) int {
	r := lo.Replicas
	if r == 0 {
		r = DefaultReplicas
	}
	return min(r, voters)
}

// Validate reports the first invalid field, as an error wrapping
// ErrInvalidOptions that names it. It checks each field as
// Options.Validate checks the field of the same name (one definition of
// the bounds). It does not modify lo.
func (lo LogOptions) Validate() error {
	if lo.Replicas < 0 {
		return fmt.Errorf("%w: LogOptions.Replicas is negative (%d); 0 means the default (%d)", ErrInvalidOptions, lo.Replicas, DefaultReplicas)
	}
	// The per-log fields on a single node's Options: nothing else of
	// Options can be wrong there, so an error names one of them.
	o := Options{Dir: "validate"}
	lo.applyTo(&o)
	if err := o.Validate(); err != nil {
		return fmt.Errorf("LogOptions: %w", err)
	}
	return nil
}
