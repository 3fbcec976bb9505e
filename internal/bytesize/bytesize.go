// Package bytesize parses sizes in bytes for command-line flags: a plain
// number, or one with a binary suffix (KiB, MiB, GiB; K, M, G mean the
// same). The example node and cmd/replog-bench share it.
package bytesize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSyntax is returned (wrapped) for a value that is not a size.
var ErrSyntax = errors.New("want a number of bytes, optionally with KiB, MiB or GiB")

// Parse parses "4096", "16KiB", "64MiB", "1GiB" (or K, M, G). Negative
// sizes and sizes above math.MaxInt64 are refused.
func Parse(v string) (int64, error) {
	s := strings.TrimSpace(v)
	shift := 0
	for _, u := range []struct {
		suffix string
		shift  int
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"K", 10}, {"M", 20}, {"G", 30}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: got %q", ErrSyntax, v)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return n << shift, nil
}

// Flag is a flag.Value that stores a size in *P.
type Flag struct{ P *int64 }

// String implements flag.Value.
func (f Flag) String() string {
	if f.P == nil {
		return "0"
	}
	return strconv.FormatInt(*f.P, 10)
}

// Set implements flag.Value.
func (f Flag) Set(v string) error {
	n, err := Parse(v)
	if err != nil {
		return err
	}
	*f.P = n
	return nil
}
