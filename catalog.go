package replog

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// logSpec is what the catalog records of a named log (the core keeps it
// opaque, docs/protocol.md R80): its replicas (its bootstrap voters), its
// preferred leader and its options. Encoded as JSON: the catalog is
// small, read rarely, and a newer release may add fields an older one
// ignores.
type logSpec struct {
	Replicas []string   `json:"replicas"`
	Leader   string     `json:"preferred_leader"`
	Options  LogOptions `json:"options"`
}

func (s logSpec) encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a struct of strings and numbers
	}
	return b
}

func decodeSpec(b []byte) (logSpec, error) {
	var s logSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return logSpec{}, fmt.Errorf("%w: log spec: %v", ErrCorrupt, err)
	}
	return s, nil
}

// catalogEntry is one named log of the catalog as the Node reads it.
type catalogEntry struct {
	name string
	spec logSpec
	// incarnation is the offset, in the default log, of the entry that
	// created the log: a log deleted and created again under its name is
	// another log, with another directory.
	incarnation uint64
}

// catalog is the default log's catalog as of its readable high watermark
// hw (the default log's loop publishes one whenever it changes).
type catalog struct {
	logs map[string]catalogEntry
	hw   uint64
	// undecoded are the logs the core's catalog holds whose spec did not
	// decode (a newer release's, or damage), name to incarnation: such a
	// log exists, so the reconciler neither opens it nor removes its files.
	undecoded map[string]uint64
}

// newCatalog decodes the core's records (a spec that does not decode is
// left out of logs, kept in undecoded, and logged by the caller: err names
// the first).
//
// An entry of prev (the catalog before) of the same name and incarnation
// is taken as it is: a creation's spec never changes, and decoding every
// spec at every change would make N creations cost N² decodes.
func newCatalog(recs []replica.LogRecord, hw uint64, prev *catalog) (*catalog, error) {
	c := &catalog{logs: make(map[string]catalogEntry, len(recs)), hw: hw, undecoded: map[string]uint64{}}
	var first error
	for _, r := range recs {
		if prev != nil {
			if e, ok := prev.logs[r.Name]; ok && e.incarnation == r.Offset {
				c.logs[r.Name] = e
				continue
			}
		}
		s, err := decodeSpec(r.Spec)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("log %q: %w", r.Name, err)
			}
			c.undecoded[r.Name] = r.Offset
			continue
		}
		c.logs[r.Name] = catalogEntry{name: r.Name, spec: s, incarnation: r.Offset}
	}
	return c, first
}

// journalLogID is the ID a named log's new store first tries on the
// node's shared journal (Node.journalID): its incarnation folded into the
// journal's 32 bits (1<<32-1 is reserved). Two incarnations 1<<32-1 apart
// fold alike, so it is only a first choice.
func journalLogID(incarnation uint64) uint32 {
	return uint32(incarnation % (1<<32 - 1))
}

// incarnationSuffixMax is the longest suffix wireLogName adds to a name:
// a '.' and a uint64 in base 36 (13 digits).
const incarnationSuffixMax = 1 + 13

// MaxLogNameLength is the longest name of a named log, in bytes: on the
// wire a message names its log's incarnation too (wireLogName), within
// protocol.MaxLogNameLength.
const MaxLogNameLength = protocol.MaxLogNameLength - incarnationSuffixMax

// checkLogName checks a named log's name: protocol.ValidLogName's rule,
// within MaxLogNameLength; else an error wrapping ErrInvalidArgument.
func checkLogName(name string) error {
	if err := protocol.ValidLogName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if len(name) > MaxLogNameLength {
		return fmt.Errorf("%w: log name %q is %d bytes, over MaxLogNameLength (%d)", ErrInvalidArgument, name, len(name), MaxLogNameLength)
	}
	return nil
}

// wireLogName is what a named log's messages carry as protocol.Message.Log:
// its name and incarnation. A log deleted and created again under its name
// is another log: a node still running the old one (its catalog a little
// behind) must neither answer the new one's bootstrap question (R60: it
// would say a cluster exists, and the new log would fetch the deleted
// one's entries) nor take its messages. The suffix is of characters
// protocol.ValidLogName accepts, and the last '.' starts it.
func wireLogName(name string, incarnation uint64) string {
	return name + "." + strconv.FormatUint(incarnation, 36)
}

// logDirName is a named log's directory under <Dir>/logs: its name and
// incarnation.
func logDirName(name string, incarnation uint64) string {
	return fmt.Sprintf("%s-%d", name, incarnation)
}

// nameHash orders ties in placement: the same on every node, different
// from log to log, so that equal loads spread.
func nameHash(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// place chooses a new log's preferred leader and replicas among voters:
// the leader is the voter that is preferred leader of the fewest logs of
// c, then the least loaded (holding the fewest logs); the other n-1
// replicas are the least loaded of the rest. Ties go by a hash of the
// name and the node: the same on every node, different from log to log.
// The replicas come back in voters' order.
func place(name string, voters []string, c *catalog, n int) (replicas []string, leader string) {
	if len(voters) == 0 || n <= 0 {
		return nil, ""
	}
	load, leads := map[string]int{}, map[string]int{}
	if c != nil {
		for _, e := range c.logs {
			for _, r := range e.spec.Replicas {
				load[r]++
			}
			leads[e.spec.Leader]++
		}
	}
	tie := func(a, b string) int {
		ha, hb := nameHash(name, a), nameHash(name, b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return strings.Compare(a, b)
	}
	cand := slices.Clone(voters)
	slices.SortFunc(cand, func(a, b string) int {
		if d := leads[a] - leads[b]; d != 0 {
			return d
		}
		if d := load[a] - load[b]; d != 0 {
			return d
		}
		return tie(a, b)
	})
	leader = cand[0]
	rest := cand[1:]
	slices.SortFunc(rest, func(a, b string) int {
		if d := load[a] - load[b]; d != 0 {
			return d
		}
		return tie(a, b)
	})
	chosen := append([]string{leader}, rest[:min(n-1, len(rest))]...)
	for _, v := range voters {
		if slices.Contains(chosen, v) {
			replicas = append(replicas, v)
		}
	}
	return replicas, leader
}

// LogInfo describes one named log of the catalog (Node.Logs).
type LogInfo struct {
	// Name is the log's name.
	Name string `json:"name"`
	// Replicas are the nodes that hold it: its voters at creation.
	Replicas []string `json:"replicas"`
	// PreferredLeader is the replica the Node's balancer moves its
	// leadership to whenever it is a caught-up voter.
	PreferredLeader string `json:"preferred_leader"`
	// Options are the options it was created with.
	Options LogOptions `json:"options"`
	// Local says whether this node is one of its replicas.
	Local bool `json:"local"`
	// Open says whether it is open on this node now (a local log opens
	// shortly after its creation commits).
	Open bool `json:"open"`
}

// sortedInfos lists c's logs for Node.Logs, sorted by name.
func (c *catalog) infos(self string, open func(name string) bool) []LogInfo {
	out := make([]LogInfo, 0, len(c.logs))
	for _, e := range c.logs {
		out = append(out, LogInfo{
			Name:            e.name,
			Replicas:        slices.Clone(e.spec.Replicas),
			PreferredLeader: e.spec.Leader,
			Options:         e.spec.Options,
			Local:           slices.Contains(e.spec.Replicas, self),
			Open:            open(e.name),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
