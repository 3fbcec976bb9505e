package replog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SlogLevelTrace is the slog level SlogLogger gives hclog's Trace records
// (the protocol's per-message detail): below slog.LevelDebug, so that a
// handler at Debug drops them.
const SlogLevelTrace = slog.LevelDebug - 4

// The attributes replog's loggers carry on their records (besides each
// call's own), as SlogLogger writes them unless SlogOptions say otherwise.
const (
	// SlogAttrNode is the node's ID (Options.NodeID), which Open adds
	// with With to every record of the Log: a service whose handler
	// already carries its node ID (slog.With("node", id)) would see it
	// twice, and omits or renames it with SlogOptions.
	SlogAttrNode = "node"
	// SlogAttrLogger is the component that logged, the hclog name
	// replog's Named gives it: "storage", "writer", "replica" (whose
	// records also carry "id", its node ID), "transport" (its
	// connections' records "peer" and "lane", or "remote"), "membership"
	// and "membership.memberlist"; absent on the node's own records. A
	// name given to Options.Logger comes first ("replog.transport").
	SlogAttrLogger = "logger"
)

// SlogOptions adjust the attributes a logger from SlogLoggerWith writes.
// They apply to what a logger carries (the name in SlogAttrLogger and
// With's attributes, SlogAttrNode among them), not to the attributes of
// a single call (gossip's records about another member name it
// "member"; the records of a clash of node IDs name this node's "node").
// The zero value writes every attribute under replog's key.
type SlogOptions struct {
	// Omit lists keys left out, e.g. SlogAttrNode when the handler
	// already carries the service's node ID. Default none.
	Omit []string
	// Rename maps a key to the key it is written under, e.g.
	// {SlogAttrLogger: "component"} for a service that names its own
	// parts so. Default none.
	Rename map[string]string
}

// Validate reports the first invalid field, naming it, as an error
// wrapping ErrInvalidOptions. It does not modify o.
func (o SlogOptions) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: SlogOptions.%s %s", ErrInvalidOptions, field, fmt.Sprintf(format, args...))
	}
	for _, k := range o.Omit {
		if k == "" {
			return bad("Omit", "lists an empty key")
		}
	}
	from := make(map[string]string, len(o.Rename))
	for _, k := range slices.Sorted(maps.Keys(o.Rename)) {
		to := o.Rename[k]
		switch {
		case k == "" || to == "":
			return bad("Rename", "maps %q to %q: keys must not be empty", k, to)
		case slices.Contains(o.Omit, k):
			return bad("Rename", "renames %q, which Omit leaves out", k)
		case from[to] != "":
			return bad("Rename", "maps both %q and %q to %q", from[to], k, to)
		}
		from[to] = k
	}
	return nil
}

// SlogLogger returns an hclog.Logger that writes every record to l, for
// Options.Logger: a service that logs with log/slog gets replog's logs,
// memberlist's included, in the same handler. It is SlogLoggerWith with
// zero SlogOptions.
//
// Levels map to slog's (Trace to SlogLevelTrace, Debug, Info, Warn and
// Error to theirs); l's handler decides what is emitted, and SetLevel on
// the returned logger (or on one derived from it) filters further for
// that logger and those derived from it. The hclog name, dotted
// ("n1.transport" once replog has named it), goes in the attribute
// "logger" (SlogAttrLogger); With's key/value pairs become attributes,
// as slog.Logger.With makes them (Open adds SlogAttrNode). Source
// positions, if l's handler records them, name the caller of the hclog
// method. Loggers from StandardLogger and StandardWriter write each line
// as one record, at the level its "[ERR]"/"[WARN]"-style prefix names
// with InferLevels, else at Info (or ForceLevel).
func SlogLogger(l *slog.Logger) hclog.Logger {
	return &slogLogger{l: l, level: new(atomic.Int32)}
}

// SlogLoggerWith is SlogLogger with o applied to the attributes the
// logger carries: with SlogOptions{Omit: []string{replog.SlogAttrNode}},
// a handler that already carries the service's node ID gets it once.
// Errors: o.Validate's (ErrInvalidOptions).
func SlogLoggerWith(l *slog.Logger, o SlogOptions) (hclog.Logger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	keys := make(map[string]string, len(o.Omit)+len(o.Rename))
	for _, k := range o.Omit {
		keys[k] = ""
	}
	maps.Copy(keys, o.Rename)
	return &slogLogger{l: l, level: new(atomic.Int32), keys: keys}, nil
}

// slogLogger is SlogLogger's hclog.Logger.
type slogLogger struct {
	l       *slog.Logger
	name    string
	implied []any
	// level is hclog.NoLevel (0: l's handler decides) or the least level
	// emitted; shared with the loggers derived from this one, as hclog's
	// SetLevel is.
	level *atomic.Int32
	// keys maps a carried attribute's key to the key it is written under
	// ("": left out); nil writes every key as it is (SlogOptions).
	keys map[string]string
}

// key returns the key a carried attribute k is written under ("": none).
func (s *slogLogger) key(k string) string {
	if to, ok := s.keys[k]; ok {
		return to
	}
	return k
}

// carried rewrites With's arguments by s.keys (a new slice; args is the
// caller's).
func (s *slogLogger) carried(args []any) []any {
	if len(s.keys) == 0 {
		return args
	}
	out := make([]any, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch a := args[i].(type) {
		case slog.Attr:
			if a.Key = s.key(a.Key); a.Key != "" {
				out = append(out, a)
			}
		case string:
			if i+1 == len(args) {
				out = append(out, a) // a key without a value: slog's !BADKEY
				continue
			}
			if k := s.key(a); k != "" {
				out = append(out, k, args[i+1])
			}
			i++
		default:
			out = append(out, a)
		}
	}
	return out
}

var _ hclog.Logger = (*slogLogger)(nil)

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return SlogLevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (s *slogLogger) enabled(level hclog.Level) bool {
	if level == hclog.Off {
		return false
	}
	if least := hclog.Level(s.level.Load()); least != hclog.NoLevel && level < least {
		return false
	}
	return s.l.Enabled(context.Background(), slogLevel(level))
}

// emit logs one record; skip is the number of frames between the
// caller of the hclog method and emit.
func (s *slogLogger) emit(skip int, level hclog.Level, msg string, args []any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !s.enabled(level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(skip+2, pcs[:]) // Callers and emit
	r := slog.NewRecord(time.Now(), slogLevel(level), msg, pcs[0])
	if k := s.key(SlogAttrLogger); s.name != "" && k != "" {
		r.AddAttrs(slog.String(k, s.name))
	}
	r.Add(args...)
	_ = s.l.Handler().Handle(context.Background(), r)
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) { s.emit(1, level, msg, args) }
func (s *slogLogger) Trace(msg string, args ...any)                  { s.emit(1, hclog.Trace, msg, args) }
func (s *slogLogger) Debug(msg string, args ...any)                  { s.emit(1, hclog.Debug, msg, args) }
func (s *slogLogger) Info(msg string, args ...any)                   { s.emit(1, hclog.Info, msg, args) }
func (s *slogLogger) Warn(msg string, args ...any)                   { s.emit(1, hclog.Warn, msg, args) }
func (s *slogLogger) Error(msg string, args ...any)                  { s.emit(1, hclog.Error, msg, args) }

func (s *slogLogger) IsTrace() bool { return s.enabled(hclog.Trace) }
func (s *slogLogger) IsDebug() bool { return s.enabled(hclog.Debug) }
func (s *slogLogger) IsInfo() bool  { return s.enabled(hclog.Info) }
func (s *slogLogger) IsWarn() bool  { return s.enabled(hclog.Warn) }
func (s *slogLogger) IsError() bool { return s.enabled(hclog.Error) }

func (s *slogLogger) ImpliedArgs() []any { return append([]any(nil), s.implied...) }

func (s *slogLogger) With(args ...any) hclog.Logger {
	c := *s
	c.l = s.l.With(s.carried(args)...)
	c.implied = append(append([]any(nil), s.implied...), args...)
	return &c
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	c := *s
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	c := *s
	c.name = name
	return &c
}

// SetLevel sets the least level this logger and those derived from it
// emit (hclog.NoLevel: whatever the slog handler enables).
func (s *slogLogger) SetLevel(level hclog.Level) { s.level.Store(int32(level)) }

// GetLevel returns the level set by SetLevel or, without one, the least
// level the slog handler enables.
func (s *slogLogger) GetLevel() hclog.Level {
	if lv := hclog.Level(s.level.Load()); lv != hclog.NoLevel {
		return lv
	}
	for lv := hclog.Trace; lv <= hclog.Error; lv++ {
		if s.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &slogWriter{s: s, opts: *opts}
}

// slogWriter is StandardWriter's io.Writer: one record per write.
type slogWriter struct {
	s    *slogLogger
	opts hclog.StandardLoggerOptions
}

var stdLevels = []struct {
	prefix string
	level  hclog.Level
}{
	{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
	{"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error},
}

func (w *slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := hclog.Info
	if w.opts.InferLevels || w.opts.ForceLevel != hclog.NoLevel {
		for _, l := range stdLevels {
			if rest, ok := strings.CutPrefix(msg, l.prefix); ok {
				msg = strings.TrimSpace(rest)
				if w.opts.InferLevels {
					level = l.level
				}
				break
			}
		}
	}
	if w.opts.ForceLevel != hclog.NoLevel {
		level = w.opts.ForceLevel
	}
	w.s.emit(3, level, msg, nil) // Write, log.Logger.output, log.Logger.Print*
	return len(p), nil
}
