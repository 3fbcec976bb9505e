package protocol

// CleanerCheckpoint is what a compacted log's last complete pass left
// behind (docs/storage.md 13): below Point the log is compacted (every
// key has at most one entry there, its newest below Point), and Segments
// summarises each sealed segment below Point, so that the next pass reads
// only the log from Point on (the dirty part) and rewrites only the
// segments below it that hold a key the dirty part supersedes or a
// tombstone that has expired. The store keeps it beside the log; a lost
// or torn one means nothing is clean (a full pass), never a wrong skip.
type CleanerCheckpoint struct {
	Point    uint64
	Segments []SegmentSummary
}

// SegmentSummary is what a compaction pass learnt of one sealed segment
// [Base, End) as it left it: the hashes of the entry keys it holds
// (EntryKeyHash, sorted, each once) and the time of its oldest tombstone
// (milliseconds; 0: it holds none with a time).
type SegmentSummary struct {
	Base, End uint64
	Keys      []uint64
	Tombstone int64
}

// EntryKeyHash is the hash a SegmentSummary keeps of an entry key: 64-bit
// FNV-1a, the same in every process and release (a summary outlives the
// process that wrote it). Two keys with one hash only make a pass read a
// segment it could have skipped.
func EntryKeyHash(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return h
}
