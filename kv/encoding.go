package kv

import "github.com/replog-io/replog/internal/kvstate"

// The KV's entries on the log, their entry keys and what applying one
// does are internal/kvstate's, the one definition the simulation applies
// too.

// MaxKeyBytes is the longest key, in bytes.
const MaxKeyBytes = kvstate.MaxKeyBytes

// checkKey is the rule for keys: non-empty UTF-8 of at most MaxKeyBytes,
// so that keys print, sort and travel in URLs.
func checkKey(k string) error { return kvstate.CheckKey(k) }
