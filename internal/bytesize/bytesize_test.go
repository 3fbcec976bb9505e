package bytesize

import (
	"errors"
	"flag"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "16KiB": 16 << 10, " 64 MiB ": 64 << 20, "1GiB": 1 << 30, "2K": 2048, "3M": 3 << 20, "1G": 1 << 30} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "MiB", "ten", "8589934592GiB"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
	if _, err := Parse("x"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Parse(x) = %v, want ErrSyntax", err)
	}
}

func TestFlag(t *testing.T) {
	var n int64
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(Flag{&n}, "size", "")
	if err := fs.Parse([]string{"-size", "2MiB"}); err != nil || n != 2<<20 {
		t.Fatalf("-size 2MiB: %d, %v", n, err)
	}
	if err := fs.Parse([]string{"-size", "nope"}); err == nil {
		t.Fatal("-size nope accepted")
	}
}
