package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Encoding of one message (all integers big-endian):
//
//	version  uint8   Version
//	kind     uint8   Kind of the body
//	from     string
//	to       string
//	log      string  Message.Log, from LogNameVersion on ("" for the default log)
//	body     the body's fields in declaration order (see AppendMessage)
//
// A string or byte slice is a uint32 length followed by its bytes; a slice of
// entries or records is a uint32 count followed by its elements; a bool is
// one byte, 0 or 1. An entry is offset u64, epoch u64, time u64 (int64
// milliseconds), type u8, data bytes. An AppendRequest ends with its Type
// (u8) only when that is not data (EntryControl or EntryVoters: the only
// other types it may carry); a data request ends after its records, so that its bytes are
// those it had before the field existed. The decoder takes exactly that
// form: a type byte of data, or of an unknown type, is malformed. A
// FetchResponse ends with its LogStartVoters: a count, then each row's
// offset (u64) and its set as bytes (EncodeVoterSet); a set that
// DecodeVoterSet refuses is malformed; then its LogStartEpoch (u64).
//
// The encoding carries no length of its own and no checksum: a transport
// frames it (transport prefixes the length and appends a CRC-32C over both).
// Fixed-width integers keep encoding and decoding branch-free and let the
// decoder bound a count by the bytes left before allocating anything.

// Version is the first byte of every message this package encodes
// (AppendMessageAt: the version asked for). A message with a version
// outside MinVersion..Version is rejected with ErrMalformed (one above
// Version also with ErrUnknownMessage). Version 2
// added VoteRequest.Round, VoteResponse.RequestEpoch and Round, and
// AppendRequest.Epoch; version 3 added Entry.Time, AppendRequest.Type and
// DeleteRecords; version 4 added the directory IDs (FetchRequest.
// ReplicaDirID, VoteRequest.CandidateDirID and VoterDirID,
// VoteResponse.VoterDirID), FetchRequest.Restand, EntryVoters and
// EndEpoch; version 5 added VoteResponse.Formed and
// FetchResponse.LogStartVoters and LogStartEpoch; version 6 added voter
// sets with owed incarnations (EncodeVoterSet's format 2, in entries and
// in LogStartVoters), which a version-5 node would refuse as malformed;
// version 7 added FetchRequest.FeatureLevel (FeatureLevelVersion);
// version 8 added FetchRequest.DurableOffset (DurableOffsetVersion);
// version 9 added Message.Log, in every message (LogNameVersion), and the
// kinds SnapshotRequest and SnapshotResponse (SnapshotTransferVersion);
// version 10 added FetchRequest.Quiescent, FetchResponse.Quiescent and the
// kind Heartbeat (QuiescenceVersion); feature level 10 also brings key
// header format 2 (FeatureLevelKeys), which travels inside entry Data.
//
// Version is the newest version this package encodes and decodes,
// MinVersion the oldest: a node speaks every version between them, and
// the transport encodes each connection's frames in the highest version
// both ends speak (AppendMessageAt). A later format change adds a
// version; its new kinds and fields are encoded only at that version, so
// a peer is never sent what it cannot read, and MinVersion moves up only
// when no supported release speaks the older version any more.
const Version = 10

// MinVersion is the oldest version this package encodes and decodes.
const MinVersion = 6

const (
	// HeaderSize is the length of the header that starts every encoded
	// message: the version byte and the kind byte. A stream reader may read
	// it first and learn the kind with KindOf before the rest arrives.
	HeaderSize = 2
	// MinSize is the length of the shortest encoded message in any
	// version spoken: the header and an empty From and To (every body
	// adds to it, and from LogNameVersion on so does the Log's length).
	MinSize = HeaderSize + 4 + 4
)

// minEntrySize is the smallest encoding of an Entry: offset, epoch, time,
// type and an empty data length.
const minEntrySize = 8 + 8 + 8 + 1 + 4

// minVotersRowSize is the smallest encoding of a FetchResponse's
// LogStartVoters row: offset, set length, and a set's format and count.
const minVotersRowSize = 8 + 4 + 2

// Compile-time checks of EntryOverhead's claim: an entry's and a record's
// encoding beyond its data (minEntrySize, and a record's length) is within
// EntryOverhead, so byte budgets counted with it bound the encoded size (a
// negative uint constant does not compile).
const (
	_ uint = EntryOverhead - minEntrySize
	_ uint = EntryOverhead - 4
)

// Errors of the codec. They are wrapped with %w and context (the field, the
// byte position within the message), so test with errors.Is.
var (
	// ErrMalformed: a message could not be decoded (version, kind, a
	// length or count past the end, a bool other than 0 or 1, trailing
	// bytes), or a message to encode has no body.
	ErrMalformed = errors.New("replog: malformed message")
	// ErrTooLarge: a message to encode is above 4 GiB, which its uint32
	// lengths cannot describe.
	ErrTooLarge = errors.New("replog: message too large")
	// ErrUnknownMessage: a message of a kind this package does not know,
	// or of a version above Version: what a newer peer may send, not
	// garbage. It is wrapped together with ErrMalformed; a receiver that
	// framed the message correctly may drop it and carry on (the feature
	// is absent here) instead of treating the stream as broken.
	ErrUnknownMessage = errors.New("replog: unknown message kind or version")
	// ErrVersion: AppendMessageAt was asked for a version outside
	// MinVersion..Version.
	ErrVersion = errors.New("replog: wire version not spoken")
	// ErrLogNameVersion: AppendMessageAt was asked to encode a message of
	// a named log (Message.Log set) below LogNameVersion, which has no
	// place for the name: the peer would read it as the default log's.
	ErrLogNameVersion = errors.New("replog: a named log's message needs a newer wire version")
)

// EncodedSize returns the size in bytes of m's encoding (what
// AppendMessage appends), or -1 if m has no (or a nil) body.
func EncodedSize(m Message) int {
	return EncodedSizeAt(m, Version)
}

// EncodedSizeAt is EncodedSize in the encoding of wire version v (what
// AppendMessageAt appends for v): a field a later version added takes no
// bytes below it. It is never above EncodedSize for a version spoken.
func EncodedSizeAt(m Message, v uint8) int {
	n := HeaderSize + 4 + len(m.From) + 4 + len(m.To)
	if v >= LogNameVersion {
		n += 4 + len(m.Log)
	}
	switch b := m.Body.(type) {
	case *FetchRequest:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.ReplicaID) + 4 + len(b.ReplicaDirID) + 8 + 8 + 8 + 4 + 4 + 1
		if v >= FeatureLevelVersion {
			n++ // FeatureLevel
		}
		if v >= DurableOffsetVersion {
			n += 1 + 8 // HasDurableOffset, DurableOffset
		}
		if v >= QuiescenceVersion {
			n++ // Quiescent
		}
	case *FetchResponse:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.LeaderID) + 8 + 1 + 8 + 8 + 8 + 8 + 4
		n += len(b.Entries) * minEntrySize
		for i := range b.Entries {
			n += len(b.Entries[i].Data)
		}
		n += 4 + 8
		for _, r := range b.LogStartVoters {
			n += 8 + 4 + encodedVoterSetSize(r.Voters, r.Owed)
		}
		if v >= QuiescenceVersion {
			n++ // Quiescent
		}
	case *VoteRequest:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.CandidateID) + 8 + 8 + 1 + 8 + 4 + len(b.CandidateDirID) + 4 + len(b.VoterDirID)
	case *VoteResponse:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.VoterID) + 1 + 1 + 8 + 8 + 4 + len(b.LeaderID) + 4 + len(b.VoterDirID) + 1
	case *BeginEpoch:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.LeaderID)
	case *AppendRequest:
		if b == nil {
			return -1
		}
		n += 8 + 8 + 4 + 4*len(b.Records)
		for _, r := range b.Records {
			n += len(r)
		}
		if !b.dataType() {
			n++
		}
	case *AppendResponse:
		if b == nil {
			return -1
		}
		n += 8 + 1 + 4 + len(b.LeaderID) + 8
	case *DeleteRecords:
		if b == nil {
			return -1
		}
		n += 8 + 8
	case *EndEpoch:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.LeaderID) + 4 + len(b.Successor)
	case *SnapshotRequest:
		if b == nil {
			return -1
		}
		n += snapshotRequestSize
	case *SnapshotResponse:
		if b == nil {
			return -1
		}
		n += snapshotResponseSize + len(b.LeaderID) + len(b.Data)
	case *Heartbeat:
		if b == nil {
			return -1
		}
		n += heartbeatSize
	default:
		return -1
	}
	return n
}

// AppendMessage appends the encoding of m to dst and returns the extended
// slice. It grows dst at most once (the size is computed first) and makes
// no other allocation, so a writer that reuses dst encodes without
// allocating. It fails only for a message without a body (ErrMalformed),
// one above 4 GiB (ErrTooLarge), or one whose Log is neither "" nor a valid
// name (ErrInvalidLogName, as the decoder would refuse it); callers enforce
// their own, smaller limit with EncodedSize before encoding. On failure dst
// is returned unchanged.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	return AppendMessageAt(dst, m, Version)
}

// AppendMessageAt is AppendMessage in the encoding of wire version v, one
// of MinVersion..Version (else ErrVersion, dst unchanged): the version a
// connection negotiated with its peer. What a later version added is left
// out below it: FetchRequest.FeatureLevel below FeatureLevelVersion (a
// version-6 peer reads the fetch without it, as the base level), and
// FetchRequest.HasDurableOffset and DurableOffset below
// DurableOffsetVersion (a version-7 peer reads the fetch offset as
// durable; a follower sends one ahead of its durable end only at
// FeatureLevelPipelinedFetch, which no such peer runs). Message.Log has no
// place below LogNameVersion: a message of a named log fails there with
// ErrLogNameVersion, dst unchanged, rather than go out as the default
// log's.
func AppendMessageAt(dst []byte, m Message, v uint8) ([]byte, error) {
	if v < MinVersion || v > Version {
		return dst, fmt.Errorf("%w: %d (this node speaks %d..%d)", ErrVersion, v, MinVersion, Version)
	}
	if m.Log != "" {
		if v < LogNameVersion {
			return dst, fmt.Errorf("%w: message %s->%s of log %q at wire version %d (names travel from %d on)",
				ErrLogNameVersion, m.From, m.To, m.Log, v, LogNameVersion)
		}
		if err := ValidLogName(m.Log); err != nil {
			return dst, fmt.Errorf("message %s->%s: %w", m.From, m.To, err)
		}
	}
	switch m.Body.(type) {
	case *SnapshotRequest, *SnapshotResponse:
		if v < SnapshotTransferVersion {
			return dst, fmt.Errorf("%w: %s needs wire version %d, not %d", ErrVersion, m.Body.Kind(), SnapshotTransferVersion, v)
		}
	case *Heartbeat:
		if v < QuiescenceVersion {
			return dst, fmt.Errorf("%w: %s needs wire version %d, not %d", ErrVersion, m.Body.Kind(), QuiescenceVersion, v)
		}
	}
	size := EncodedSizeAt(m, v)
	if size < 0 {
		return dst, fmt.Errorf("%w: message %s->%s has no body", ErrMalformed, m.From, m.To)
	}
	if size > math.MaxUint32 {
		return dst, fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	start := len(dst)
	if cap(dst)-start < size {
		grown := make([]byte, start, start+size)
		copy(grown, dst)
		dst = grown
	}
	be := binary.BigEndian
	dst = append(dst, v, byte(m.Body.Kind()))
	dst = appendString(dst, m.From)
	dst = appendString(dst, m.To)
	if v >= LogNameVersion {
		dst = appendString(dst, m.Log)
	}
	switch b := m.Body.(type) {
	case *FetchRequest:
		dst = be.AppendUint64(dst, b.FetchID)
		dst = appendString(dst, b.ReplicaID)
		dst = appendString(dst, b.ReplicaDirID)
		dst = be.AppendUint64(dst, b.CurrentEpoch)
		dst = be.AppendUint64(dst, b.FetchOffset)
		dst = be.AppendUint64(dst, b.LastFetchedEpoch)
		dst = be.AppendUint32(dst, b.MaxBytes)
		dst = be.AppendUint32(dst, b.MaxWaitMs)
		dst = appendBool(dst, b.Restand)
		if v >= FeatureLevelVersion {
			// Not below: a version-6 peer would refuse the byte as
			// trailing.
			dst = append(dst, b.FeatureLevel)
		}
		if v >= DurableOffsetVersion {
			dst = appendBool(dst, b.HasDurableOffset)
			dst = be.AppendUint64(dst, b.DurableOffset)
		}
		if v >= QuiescenceVersion {
			dst = appendBool(dst, b.Quiescent)
		}
	case *FetchResponse:
		dst = be.AppendUint64(dst, b.FetchID)
		dst = appendString(dst, b.LeaderID)
		dst = be.AppendUint64(dst, b.Epoch)
		dst = append(dst, byte(b.Error))
		dst = be.AppendUint64(dst, b.DivergingEpoch)
		dst = be.AppendUint64(dst, b.DivergingEndOffset)
		dst = be.AppendUint64(dst, b.HighWatermark)
		dst = be.AppendUint64(dst, b.LogStartOffset)
		dst = be.AppendUint32(dst, uint32(len(b.Entries)))
		for i := range b.Entries {
			e := &b.Entries[i]
			dst = be.AppendUint64(dst, e.Offset)
			dst = be.AppendUint64(dst, e.Epoch)
			dst = be.AppendUint64(dst, uint64(e.Time))
			dst = append(dst, byte(e.Type))
			dst = be.AppendUint32(dst, uint32(len(e.Data)))
			dst = append(dst, e.Data...)
		}
		dst = be.AppendUint32(dst, uint32(len(b.LogStartVoters)))
		for _, r := range b.LogStartVoters {
			dst = be.AppendUint64(dst, r.Offset)
			dst = be.AppendUint32(dst, uint32(encodedVoterSetSize(r.Voters, r.Owed)))
			dst = append(dst, EncodeVoterSet(r.Voters, r.Owed)...)
		}
		dst = be.AppendUint64(dst, b.LogStartEpoch)
		if v >= QuiescenceVersion {
			dst = appendBool(dst, b.Quiescent)
		}
	case *VoteRequest:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.CandidateID)
		dst = be.AppendUint64(dst, b.LastEpoch)
		dst = be.AppendUint64(dst, b.LEO)
		dst = appendBool(dst, b.PreVote)
		dst = be.AppendUint64(dst, b.Round)
		dst = appendString(dst, b.CandidateDirID)
		dst = appendString(dst, b.VoterDirID)
	case *VoteResponse:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.VoterID)
		dst = appendBool(dst, b.Granted)
		dst = appendBool(dst, b.PreVote)
		dst = be.AppendUint64(dst, b.RequestEpoch)
		dst = be.AppendUint64(dst, b.Round)
		dst = appendString(dst, b.LeaderID)
		dst = appendString(dst, b.VoterDirID)
		dst = appendBool(dst, b.Formed)
	case *BeginEpoch:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.LeaderID)
	case *AppendRequest:
		dst = be.AppendUint64(dst, b.RequestID)
		dst = be.AppendUint64(dst, b.Epoch)
		dst = be.AppendUint32(dst, uint32(len(b.Records)))
		for _, r := range b.Records {
			dst = be.AppendUint32(dst, uint32(len(r)))
			dst = append(dst, r...)
		}
		if !b.dataType() {
			dst = append(dst, byte(b.Type))
		}
	case *AppendResponse:
		dst = be.AppendUint64(dst, b.RequestID)
		dst = append(dst, byte(b.Error))
		dst = appendString(dst, b.LeaderID)
		dst = be.AppendUint64(dst, b.FirstOffset)
	case *DeleteRecords:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = be.AppendUint64(dst, b.Offset)
	case *EndEpoch:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.LeaderID)
		dst = appendString(dst, b.Successor)
	case *SnapshotRequest:
		dst = be.AppendUint64(dst, b.RequestID)
		dst = be.AppendUint64(dst, b.Epoch)
		dst = be.AppendUint64(dst, b.Offset)
		dst = be.AppendUint64(dst, b.SnapshotEpoch)
		dst = be.AppendUint64(dst, b.Position)
		dst = be.AppendUint32(dst, b.MaxBytes)
	case *SnapshotResponse:
		dst = be.AppendUint64(dst, b.RequestID)
		dst = appendString(dst, b.LeaderID)
		dst = be.AppendUint64(dst, b.Epoch)
		dst = append(dst, byte(b.Error))
		dst = be.AppendUint64(dst, b.LogStartOffset)
		dst = be.AppendUint64(dst, b.Offset)
		dst = be.AppendUint64(dst, b.SnapshotEpoch)
		dst = be.AppendUint64(dst, b.Size)
		dst = be.AppendUint32(dst, b.CRC)
		dst = be.AppendUint64(dst, b.Position)
		dst = be.AppendUint32(dst, uint32(len(b.Data)))
		dst = append(dst, b.Data...)
	case *Heartbeat:
		dst = be.AppendUint64(dst, b.Session)
		dst = be.AppendUint64(dst, b.Quiescent)
		dst = appendBool(dst, b.Resync)
	}
	return dst, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// DecodeMessage decodes the message encoded in b, which must hold exactly
// one message (trailing bytes are an error). Every problem returns an error
// wrapping ErrMalformed that says what was wrong and where (the byte
// position within b); a Log that ValidLogName refuses also wraps
// ErrInvalidLogName. A message of a version below LogNameVersion has no
// Log: it is the default log's.
//
// Entry Data and AppendRequest Records of the result alias b (capacity
// clipped, so appending to them never writes into b): the caller must not
// modify b while it uses the message (Kind.AliasesInput says which kinds
// do). Strings are copied. Decoding allocates the strings, the body and one
// entry or record slice, whose length is checked against the bytes left in
// b before it is allocated (an entry takes at least 29 bytes, a record 4),
// so a forged count cannot make it allocate beyond a small multiple of
// len(b). It never panics.
func DecodeMessage(b []byte) (Message, error) {
	if len(b) < MinSize {
		return Message{}, fmt.Errorf("%w: %d bytes is below the minimum %d", ErrMalformed, len(b), MinSize)
	}
	v := b[0]
	switch {
	case v > Version:
		return Message{}, unknownMessage(fmt.Sprintf("version %d, want %s", v, versionsSpoken()))
	case v < MinVersion:
		return Message{}, fmt.Errorf("%w: version %d, want %s", ErrMalformed, v, versionsSpoken())
	}
	kind := Kind(b[1])
	d := decoder{b: b, off: HeaderSize}
	var m Message
	m.From = d.string("from")
	m.To = d.string("to")
	if v >= LogNameVersion {
		at := d.off
		if m.Log = d.string("log"); m.Log != "" && d.err == nil {
			if err := ValidLogName(m.Log); err != nil {
				d.off = at
				d.fail("log", err)
			}
		}
	}
	switch kind {
	case KindFetchRequest:
		x := &FetchRequest{}
		x.FetchID = d.u64("fetch id")
		x.ReplicaID = d.string("replica id")
		x.ReplicaDirID = d.string("replica directory id")
		x.CurrentEpoch = d.u64("current epoch")
		x.FetchOffset = d.u64("fetch offset")
		x.LastFetchedEpoch = d.u64("last fetched epoch")
		x.MaxBytes = d.u32("max bytes")
		x.MaxWaitMs = d.u32("max wait")
		x.Restand = d.bool("restand")
		if v >= FeatureLevelVersion {
			x.FeatureLevel = d.u8("feature level")
		}
		if v >= DurableOffsetVersion {
			// Below it there is none: the fetch offset is durable.
			x.HasDurableOffset = d.bool("has durable offset")
			x.DurableOffset = d.u64("durable offset")
		}
		if v >= QuiescenceVersion {
			x.Quiescent = d.bool("quiescent")
		}
		m.Body = x
	case KindFetchResponse:
		x := &FetchResponse{}
		x.FetchID = d.u64("fetch id")
		x.LeaderID = d.string("leader id")
		x.Epoch = d.u64("epoch")
		x.Error = FetchError(d.u8("error"))
		x.DivergingEpoch = d.u64("diverging epoch")
		x.DivergingEndOffset = d.u64("diverging end offset")
		x.HighWatermark = d.u64("high watermark")
		x.LogStartOffset = d.u64("log start offset")
		if cnt := d.count("entries", minEntrySize); cnt > 0 {
			x.Entries = make([]Entry, cnt)
			for i := range x.Entries {
				e := &x.Entries[i]
				e.Offset = d.u64("entry offset")
				e.Epoch = d.u64("entry epoch")
				e.Time = int64(d.u64("entry time"))
				e.Type = EntryType(d.u8("entry type"))
				e.Data = d.bytes("entry data")
			}
		}
		if cnt := d.count("log start voters", minVotersRowSize); cnt > 0 {
			x.LogStartVoters = make([]VotersAt, cnt)
			for i := range x.LogStartVoters {
				r := &x.LogStartVoters[i]
				r.Offset = d.u64("log start voters offset")
				if set := d.bytes("log start voters set"); d.err == nil {
					vs, owed, err := DecodeVoterSet(set)
					if err != nil {
						d.fail("log start voters set", err)
					}
					r.Voters, r.Owed = vs, owed
				}
			}
		}
		x.LogStartEpoch = d.u64("log start epoch")
		if v >= QuiescenceVersion {
			x.Quiescent = d.bool("quiescent")
		}
		m.Body = x
	case KindVoteRequest:
		x := &VoteRequest{}
		x.Epoch = d.u64("epoch")
		x.CandidateID = d.string("candidate id")
		x.LastEpoch = d.u64("last epoch")
		x.LEO = d.u64("leo")
		x.PreVote = d.bool("pre-vote")
		x.Round = d.u64("round")
		x.CandidateDirID = d.string("candidate directory id")
		x.VoterDirID = d.string("voter directory id")
		m.Body = x
	case KindVoteResponse:
		x := &VoteResponse{}
		x.Epoch = d.u64("epoch")
		x.VoterID = d.string("voter id")
		x.Granted = d.bool("granted")
		x.PreVote = d.bool("pre-vote")
		x.RequestEpoch = d.u64("request epoch")
		x.Round = d.u64("round")
		x.LeaderID = d.string("leader id")
		x.VoterDirID = d.string("voter directory id")
		x.Formed = d.bool("formed")
		m.Body = x
	case KindBeginEpoch:
		x := &BeginEpoch{}
		x.Epoch = d.u64("epoch")
		x.LeaderID = d.string("leader id")
		m.Body = x
	case KindAppendRequest:
		x := &AppendRequest{}
		x.RequestID = d.u64("request id")
		x.Epoch = d.u64("epoch")
		if cnt := d.count("records", 4); cnt > 0 {
			x.Records = make([][]byte, cnt)
			for i := range x.Records {
				x.Records[i] = d.bytes("record")
			}
		}
		if d.err == nil && d.off < len(b) {
			// The type follows only when it is not data.
			switch t := EntryType(d.u8("type")); t {
			case EntryControl, EntryVoters, EntryKeyed, EntryState:
				x.Type = t
			default:
				d.off--
				d.fail("type", fmt.Errorf("is %s: only %s, %s, %s and %s are encoded", t, EntryControl, EntryVoters, EntryKeyed, EntryState))
			}
		}
		m.Body = x
	case KindAppendResponse:
		x := &AppendResponse{}
		x.RequestID = d.u64("request id")
		x.Error = AppendError(d.u8("error"))
		x.LeaderID = d.string("leader id")
		x.FirstOffset = d.u64("first offset")
		m.Body = x
	case KindDeleteRecords:
		x := &DeleteRecords{}
		x.Epoch = d.u64("epoch")
		x.Offset = d.u64("offset")
		m.Body = x
	case KindEndEpoch:
		x := &EndEpoch{}
		x.Epoch = d.u64("epoch")
		x.LeaderID = d.string("leader id")
		x.Successor = d.string("successor")
		m.Body = x
	case KindSnapshotRequest, KindSnapshotResponse:
		if v < SnapshotTransferVersion {
			return Message{}, fmt.Errorf("%w: %s at version %d (it needs %d)", ErrMalformed, kind, v, SnapshotTransferVersion)
		}
		if kind == KindSnapshotRequest {
			x := &SnapshotRequest{}
			x.RequestID = d.u64("request id")
			x.Epoch = d.u64("epoch")
			x.Offset = d.u64("offset")
			x.SnapshotEpoch = d.u64("snapshot epoch")
			x.Position = d.u64("position")
			x.MaxBytes = d.u32("max bytes")
			m.Body = x
			break
		}
		x := &SnapshotResponse{}
		x.RequestID = d.u64("request id")
		x.LeaderID = d.string("leader id")
		x.Epoch = d.u64("epoch")
		x.Error = SnapshotError(d.u8("error"))
		x.LogStartOffset = d.u64("log start offset")
		x.Offset = d.u64("offset")
		x.SnapshotEpoch = d.u64("snapshot epoch")
		x.Size = d.u64("size")
		x.CRC = d.u32("crc")
		x.Position = d.u64("position")
		x.Data = d.bytes("data")
		m.Body = x
	case KindHeartbeat:
		if v < QuiescenceVersion {
			return Message{}, fmt.Errorf("%w: %s at version %d (it needs %d)", ErrMalformed, kind, v, QuiescenceVersion)
		}
		x := &Heartbeat{}
		x.Session = d.u64("session")
		x.Quiescent = d.u64("quiescent")
		x.Resync = d.bool("resync")
		m.Body = x
	case 0:
		return Message{}, fmt.Errorf("%w: unknown kind 0", ErrMalformed)
	default:
		// Kinds are numbered from 1 and never renumbered: any other is
		// one a newer version added.
		return Message{}, unknownMessage(fmt.Sprintf("unknown kind %d", uint8(kind)))
	}
	if d.err != nil {
		return Message{}, fmt.Errorf("%w: %s: %w", ErrMalformed, kind, d.err)
	}
	if d.off != len(b) {
		return Message{}, fmt.Errorf("%w: %s: %d trailing bytes", ErrMalformed, kind, len(b)-d.off)
	}
	return m, nil
}

// unknownMessage is the error of a message a newer peer may send: it
// reads as the ErrMalformed it always was and is also ErrUnknownMessage.
type unknownMessage string

func (e unknownMessage) Error() string { return ErrMalformed.Error() + ": " + string(e) }

func (e unknownMessage) Is(target error) bool {
	return target == ErrMalformed || target == ErrUnknownMessage
}

// versionsSpoken formats MinVersion..Version for errors ("6" when they
// are one).
func versionsSpoken() string {
	if MinVersion == Version {
		return fmt.Sprint(Version)
	}
	return fmt.Sprintf("%d..%d", MinVersion, Version)
}

// errShort is wrapped by decoder errors for fields running past the message.
var errShort = errors.New("runs past the end of the message")

// decoder reads fields from one message. After the first error
// every read returns a zero value, so the decode functions read straight
// through and check d.err once.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%s (byte %d): %w", field, d.off, err)
	}
}

func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail(field, errShort)
		return nil
	}
	s := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u8(field string) uint8 {
	if s := d.take(field, 1); s != nil {
		return s[0]
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if s := d.take(field, 4); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if s := d.take(field, 8); s != nil {
		return binary.BigEndian.Uint64(s)
	}
	return 0
}

func (d *decoder) bool(field string) bool {
	if d.err != nil {
		return false
	}
	switch v := d.u8(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.off--
		d.fail(field, fmt.Errorf("is %d, not a bool", v))
		return false
	}
}

// length reads a uint32 length and checks it against the bytes left.
func (d *decoder) length(field string) int {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 4 {
		d.fail(field, fmt.Errorf("length %w", errShort))
		return 0
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	if left := len(d.b) - d.off - 4; uint64(n) > uint64(left) {
		d.fail(field, fmt.Errorf("length %d %w (%d bytes left)", n, errShort, left))
		return 0
	}
	d.off += 4
	return int(n)
}

func (d *decoder) string(field string) string {
	n := d.length(field)
	if n == 0 {
		return ""
	}
	return string(d.take(field, n))
}

// bytes returns the next length-prefixed byte slice, aliasing the input;
// nil when empty.
func (d *decoder) bytes(field string) []byte {
	n := d.length(field)
	if n == 0 {
		return nil
	}
	return d.take(field, n)
}

// count reads an element count and checks that the bytes left could hold
// that many elements of at least minSize bytes each, so a forged count
// cannot make the decoder allocate more than the frame justifies.
func (d *decoder) count(field string, minSize int) int {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 4 {
		d.fail(field, fmt.Errorf("count %w", errShort))
		return 0
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	if left := len(d.b) - d.off - 4; uint64(n)*uint64(minSize) > uint64(left) {
		d.fail(field, fmt.Errorf("count %d needs at least %d bytes, %d left", n, uint64(n)*uint64(minSize), left))
		return 0
	}
	d.off += 4
	return int(n)
}

// KindOf returns the kind of the message whose encoding starts b (its
// second byte), or 0 (no kind) if b is shorter than HeaderSize. It does not
// check the version or anything else: DecodeMessage does.
func KindOf(b []byte) Kind {
	if len(b) < HeaderSize {
		return 0
	}
	return Kind(b[1])
}

// AliasesInput reports whether a decoded message of kind k aliases the
// bytes it was decoded from (FetchResponse entries' Data, AppendRequest
// Records, SnapshotResponse Data). A reader that reuses its buffer must give such a message a
// buffer of its own; the others copy everything they keep.
func (k Kind) AliasesInput() bool {
	return k == KindFetchResponse || k == KindAppendRequest || k == KindSnapshotResponse
}

// String names the kind ("FetchRequest", ..., or "kind(N)").
func (k Kind) String() string {
	switch k {
	case KindFetchRequest:
		return "FetchRequest"
	case KindFetchResponse:
		return "FetchResponse"
	case KindVoteRequest:
		return "VoteRequest"
	case KindVoteResponse:
		return "VoteResponse"
	case KindBeginEpoch:
		return "BeginEpoch"
	case KindAppendRequest:
		return "AppendRequest"
	case KindAppendResponse:
		return "AppendResponse"
	case KindDeleteRecords:
		return "DeleteRecords"
	case KindEndEpoch:
		return "EndEpoch"
	case KindSnapshotRequest:
		return "SnapshotRequest"
	case KindSnapshotResponse:
		return "SnapshotResponse"
	case KindHeartbeat:
		return "Heartbeat"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
