package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The many-logs modes are modes: one at a time, with any other mode
// refused (positive control: each alone parses).
func TestManyLogsFlagsAreModes(t *testing.T) {
	for _, f := range []string{"-logs", "-idle-logs", "-create-logs", "-restart-logs", "-failover-logs"} {
		if _, err := parseFlags([]string{f, "4"}, io.Discard); err != nil {
			t.Errorf("%s 4: %v", f, err)
		}
		if _, err := parseFlags([]string{f, "4", "-catchup", "10"}, io.Discard); err == nil || !strings.Contains(err.Error(), "modes") {
			t.Errorf("%s 4 -catchup 10: %v, want the modes refused", f, err)
		}
		if _, err := parseFlags([]string{f, "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%s -1: %v, want an error naming it", f, err)
		}
	}
}

// Each many-logs mode end to end on 3 nodes without fsync, with a few
// logs: it prints its result line, and what it measured holds.
func TestManyLogsModes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *regexp.Regexp
	}{
		{[]string{"-logs", "3", "-clients", "2", "-duration", "300ms"}, regexp.MustCompile(`(?ms)^appends=[1-9]\d* failed=\d+ ops/s=.*^cpu/append=[\d.]+µs .*^journal n1 rounds=[1-9]\d* .* checkpoints=\d+ checkpoint-time=\S+ journal-waits=\d+$`)},
		{[]string{"-idle-logs", "3", "-duration", "200ms"}, regexp.MustCompile(`(?m)^idle logs=3 vs 1: fetches/s per peer pair x[\d.]+; per idle log heap=`)},
		{[]string{"-create-logs", "3"}, regexp.MustCompile(`(?m)^create logs=3 in \S+: \d+ logs/s`)},
		{[]string{"-create-logs", "6", "-create-concurrency", "6"}, regexp.MustCompile(`(?m)^create logs=6 in \S+: \d+ logs/s; .* replicas map\[n1:7 n2:7 n3:7\]`)},
		{[]string{"-restart-logs", "3"}, regexp.MustCompile(`(?m)^restart logs=3: open=\S+ all 3 open=\S+ every log served=`)},
		{[]string{"-failover-logs", "3"}, regexp.MustCompile(`(?m)^failover killed n\d leading ([1-9]\d*) of 3 logs: every log led again in max=`)},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, err := parseFlags(append(tc.args, "-nosync", "-dir", t.TempDir()), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := run(c, &out); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			m := tc.want.FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("output lacks %v:\n%s", tc.want, out.String())
			}
			// Placement spreads 3 logs' leaders over 3 nodes: the node
			// killed led one, not all three.
			if len(m) > 1 {
				if n, _ := strconv.Atoi(m[1]); n == 3 {
					t.Errorf("the killed node led all 3 logs: leaders not spread\n%s", out.String())
				}
			}
		})
	}
}
