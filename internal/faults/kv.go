package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
)

// The key-value view under faults: the example serves package kv on its
// default log (/kv/{key}); KVWrite drives it, KVState reads a node's whole
// state (GET /kv/?all=1), and CheckKV checks the final states against the
// acknowledged writes. The KV's entries share the log with the appenders'
// records: ClusterConfig.KVEntries makes Entries leave them out, so that
// the record checker sees only its own.

// kvEntryPrefix opens every entry of package kv (its magic and version 1,
// kv/encoding.go); no payload EncodePayload makes starts so (ids are the
// harness's own, a letter and digits).
const kvEntryPrefix = "KV\x01"

// kvKeyPrefix starts the entry key of the KV's Puts and Deletes (from
// feature level 10 on, kv/encoding.go): a Delete has no data, only it.
const kvKeyPrefix = "kv/"

// KVOp is one KV write and what came of it.
type KVOp struct {
	// Kind is put, delete, create or update.
	Kind string
	Key  string
	// Value is the value written (none for delete); each op's is unique.
	Value string
	// Expected is an update's revision.
	Expected uint64
	Node     string
	// Outcome: OK (applied: Revision is its entry's offset), Failed (not
	// in the log), Unknown (it may be), or Refused (in the log but
	// refused when applied: an update at another revision, a create of a
	// set key; Current is the key's revision then, for an update).
	Outcome  Outcome
	Revision uint64
	Current  uint64
	Err      string
}

// Refused is a conditional KV write's outcome when it was applied but its
// condition did not hold (409): the state did not change.
const Refused Outcome = "refused"

// KVEntry is one key of a node's KV state.
type KVEntry struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Revision uint64 `json:"revision"`
}

// KVState is a node's GET /kv/?all=1.
type KVState struct {
	Next       uint64    `json:"next"`
	Entries    []KVEntry `json:"entries"`
	Opens      uint64    `json:"opens"`
	RestoredAt uint64    `json:"restored_at"`
	Snapshots  uint64    `json:"snapshots"`
	Kept       []struct {
		Offset uint64 `json:"offset"`
		Size   int64  `json:"size"`
	} `json:"kept"`
}

// KVWrite sends op (Kind, Key, Value, Expected) to n and fills in its
// outcome.
func (c *Cluster) KVWrite(ctx context.Context, n *Node, op KVOp) KVOp {
	op.Node = n.ID
	u := c.base(n) + "/kv/" + url.PathEscape(op.Key)
	method := http.MethodPut
	switch op.Kind {
	case "delete":
		method = http.MethodDelete
	case "create":
		u += "?create=1"
	case "update":
		u += fmt.Sprintf("?expected=%d", op.Expected)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader([]byte(op.Value)))
	if err != nil {
		op.Outcome, op.Err = Failed, err.Error()
		return op
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// A PUT or DELETE is idempotent to net/http, which may send it
		// again after a broken connection: a dial error proves nothing.
		op.Outcome, op.Err = Unknown, shortErr(err)
		return op
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var ans struct {
		Revision *uint64 `json:"revision"`
		Current  uint64  `json:"current"`
		Code     string  `json:"code"`
		Error    string  `json:"error"`
		Outcome  string  `json:"outcome"`
	}
	if err == nil {
		err = json.Unmarshal(body, &ans)
	}
	switch {
	case err != nil:
		op.Outcome, op.Err = Unknown, fmt.Sprintf("HTTP %d: %v", resp.StatusCode, err)
	case resp.StatusCode == http.StatusOK && ans.Revision != nil:
		op.Outcome, op.Revision = OK, *ans.Revision
	case resp.StatusCode == http.StatusConflict:
		op.Outcome, op.Current, op.Err = Refused, ans.Current, ans.Code
	case ans.Outcome == "failed":
		op.Outcome, op.Err = Failed, fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, ans.Code, ans.Error)
	default:
		op.Outcome, op.Err = Unknown, fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, ans.Code, truncate(ans.Error, 120))
	}
	return op
}

// KVState reads n's whole KV state; with linearizable after a barrier.
func (c *Cluster) KVState(ctx context.Context, n *Node, linearizable bool) (KVState, error) {
	var st KVState
	u := c.base(n) + "/kv/?all=1"
	if linearizable {
		u += "&linearizable=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: HTTP %d: %s", n.ID, resp.StatusCode, truncate(string(bytes.TrimSpace(body)), 200))
	}
	err = json.Unmarshal(body, &st)
	return st, err
}

// KVHistory records KV writes; safe for concurrent use.
type KVHistory struct {
	mu  sync.Mutex
	ops []KVOp
}

// Add records op.
func (h *KVHistory) Add(op KVOp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns the writes recorded, in the order they completed.
func (h *KVHistory) Ops() []KVOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// CheckKV checks a node's final KV state against the writes made, where
// each key had one writer, which made its writes one at a time (so a
// key's ops are in the order given): every key's state is the last
// acknowledged write's (its value at its revision, or absent after a
// delete), or one of a write of unknown outcome at a later revision. A key no write touched must be absent. It
// returns one line per violation.
func CheckKV(ops []KVOp, final []KVEntry) []string {
	byKey := map[string][]KVOp{}
	for _, o := range ops {
		byKey[o.Key] = append(byKey[o.Key], o)
	}
	state := map[string]KVEntry{}
	for _, e := range final {
		state[e.Key] = e
		if _, ok := byKey[e.Key]; !ok {
			byKey[e.Key] = nil
		}
	}
	var bad []string
	for _, key := range sortedKeys(byKey) {
		kops := byKey[key]
		e, present := state[key]
		last := -1
		for i, o := range kops {
			if o.Outcome == OK {
				last = i
			}
		}
		// What each op would leave: present with its value, or absent.
		matches := func(o KVOp) bool {
			if o.Kind == "delete" {
				return !present
			}
			return present && e.Value == o.Value
		}
		var lastRev uint64
		ok := last < 0 && !present // nothing acknowledged, nothing there
		if last >= 0 {
			o := kops[last]
			lastRev = o.Revision
			ok = matches(o) && (o.Kind == "delete" || e.Revision == o.Revision)
		}
		// An unknown write may have been applied after the acknowledged
		// one (an append of a deposed leader's, or forwarded, late):
		// then at a higher revision.
		for _, o := range kops {
			if o.Outcome == Unknown && matches(o) && (!present || e.Revision > lastRev) {
				ok = true
			}
		}
		if !ok {
			want := "absent"
			if last >= 0 && kops[last].Kind != "delete" {
				want = fmt.Sprintf("%q at revision %d", kops[last].Value, kops[last].Revision)
			}
			got := "absent"
			if present {
				got = fmt.Sprintf("%q at revision %d", e.Value, e.Revision)
			}
			bad = append(bad, fmt.Sprintf("key %q: %s, want %s (the last acknowledged of its %d writes, or an unknown one after it)", key, got, want, len(kops)))
		}
	}
	return bad
}

// errKVDiffer says two nodes' KV states differ.
var errKVDiffer = errors.New("KV states differ")

// DiffKV compares two KV states' entries; nil if equal.
func DiffKV(a, b KVState) error {
	if slices.Equal(a.Entries, b.Entries) {
		return nil
	}
	am := map[string]KVEntry{}
	for _, e := range a.Entries {
		am[e.Key] = e
	}
	bm := map[string]KVEntry{}
	for _, e := range b.Entries {
		bm[e.Key] = e
	}
	var diffs []string
	for _, k := range sortedKeys(am) {
		if bm[k] != am[k] {
			diffs = append(diffs, fmt.Sprintf("%s: %v vs %v", k, am[k], bm[k]))
		}
	}
	for _, k := range sortedKeys(bm) {
		if _, ok := am[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: absent vs %v", k, bm[k]))
		}
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return fmt.Errorf("%w (next %d vs %d, %d vs %d keys): %v", errKVDiffer, a.Next, b.Next, len(a.Entries), len(b.Entries), diffs)
}
