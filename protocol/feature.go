package protocol

import (
	"encoding/binary"
	"fmt"
)

// Cluster feature levels (docs/protocol.md R68; Kafka's metadata.version,
// etcd's cluster version). A level is a wire version the whole cluster may
// use: what needs every node to read it (a new entry kind, a new stored
// format) is written only once the log's committed EntryFeature entries
// have raised the level to the version that brought it. What only the
// peer of one connection must read follows that connection's negotiated
// version instead (AppendMessageAt). A cluster starts, and stays until a
// leader raises it, at BaseFeatureLevel, and writes no EntryFeature entry
// at that level: a node of a release before levels never receives one.

// BaseFeatureLevel is the level of a log without an EntryFeature entry:
// the wire version of the first release that knows levels, which every
// node of a cluster that holds one supports.
const BaseFeatureLevel = 6

// FeatureLevelVersion is the wire version from which a FetchRequest
// carries FeatureLevel: a version-6 peer cannot read the field, so at
// version 6 it is not encoded and decodes as 0 (BaseFeatureLevel).
const FeatureLevelVersion = 7

// FeatureLevelJournal is the level from which a node may keep its data
// directory in storage format 2, with the commit journal (storage's
// DirStore.EnableJournal): a release that supports only level 6 cannot
// read a journal and would miss the acknowledged entries still only in
// it, and the level reaches 7 only once every node supports it.
const FeatureLevelJournal = 7

// DurableOffsetVersion is the wire version from which a FetchRequest
// carries HasDurableOffset and DurableOffset: a version-7 peer cannot
// read them, so below it they are not encoded and a decoded fetch has no
// durable offset (its fetch offset is durable).
const DurableOffsetVersion = 8

// FeatureLevelPipelinedFetch is the level from which a follower sends its
// next fetch while the entries of the previous answer are still being
// written (docs/protocol.md R71): its fetch offset may then be ahead of
// what it holds durably, which only a leader that reads DurableOffset
// (R70) can tell; every node supports the level only once none runs a
// release that would count such a fetch offset as durable.
const FeatureLevelPipelinedFetch = 8

// LogNameVersion is the wire version from which every message carries
// Message.Log, the named log it belongs to: a version-8 peer cannot read
// the field, so below it the field is not encoded and a message of a named
// log cannot be (AppendMessageAt fails with ErrLogNameVersion): sent
// without its name it would reach the peer as a message of the default
// log. A message decoded below it belongs to the default log.
const LogNameVersion = 9

// FeatureLevelNamedLogs is the level from which a node may create named
// logs, which live beside the default log and share the node's journal
// (storage format 3): a release that supports only level 8 neither reads
// a message's log name nor a shared journal, and the level reaches 9 only
// once every node supports it.
const FeatureLevelNamedLogs = 9

// FeatureLevelKeys is the level from which an entry may carry an entry
// key (WithKey; key header format 2, docs/protocol.md R102): a release
// that supports only level 9 refuses a format-2 header as malformed, so
// its key table and readers would lose the batch, and the level reaches
// 10 only once every node supports it.
const FeatureLevelKeys = 10

// EntryFeature is a control entry (readers never see it) whose Data is an
// encoded level (EncodeFeatureLevel): the cluster's feature level from
// this entry on, once committed. Levels in a log never go down. It is
// itself gated: a leader writes the first one only when it raises the
// level above BaseFeatureLevel, which needs every node to support it.
const EntryFeature EntryType = 6

// EncodeFeatureLevel returns the Data of an EntryFeature entry.
func EncodeFeatureLevel(level uint8) []byte {
	return binary.AppendUvarint(nil, uint64(level))
}

// DecodeFeatureLevel decodes an EntryFeature entry's Data. It fails with
// ErrMalformed on trailing bytes, a truncated varint, or a level below
// BaseFeatureLevel or above 255.
func DecodeFeatureLevel(data []byte) (uint8, error) {
	v, n := binary.Uvarint(data)
	switch {
	case n <= 0:
		return 0, fmt.Errorf("%w: feature level: bad varint", ErrMalformed)
	case n != len(data):
		return 0, fmt.Errorf("%w: feature level: %d trailing bytes", ErrMalformed, len(data)-n)
	case v < BaseFeatureLevel || v > 255:
		return 0, fmt.Errorf("%w: feature level %d outside %d..255", ErrMalformed, v, BaseFeatureLevel)
	}
	return uint8(v), nil
}
