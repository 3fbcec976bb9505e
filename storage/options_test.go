package storage_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/storage"
)

func TestDirOptionsValidate(t *testing.T) {
	for _, good := range []storage.DirOptions{{}, {NoSync: true, Timeout: time.Minute, Logger: hclog.NewNullLogger()}} {
		if err := good.Validate(); err != nil {
			t.Fatalf("valid %+v refused: %v", good, err)
		}
	}
	cases := []struct {
		field string
		opts  storage.DirOptions
	}{
		{"DirOptions.Timeout", storage.DirOptions{Timeout: -time.Second}},
		{"DirOptions.SegmentBytes", storage.DirOptions{SegmentBytes: -1}},
	}
	for _, tc := range cases {
		err := tc.opts.Validate()
		if !errors.Is(err, storage.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidOptions naming it", tc.field, err)
		}
		// OpenDir refuses it, and creates nothing.
		dir := t.TempDir()
		if s, _, err := storage.OpenDir(filepath.Join(dir, "d"), idN1, tc.opts); !errors.Is(err, storage.ErrInvalidOptions) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: OpenDir: %v", tc.field, err)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
			t.Errorf("%s: refused options left files: %v", tc.field, m)
		}
	}
}

func TestDirOptionsEnsureDefaults(t *testing.T) {
	var o storage.DirOptions
	o.EnsureDefaults()
	if o.Timeout != storage.DefaultLockTimeout || o.Logger == nil || o.NoSync || o.SegmentBytes != storage.DefaultSegmentBytes {
		t.Fatalf("defaults: %+v", o)
	}
	set := storage.DirOptions{Timeout: time.Minute, NoSync: true, SegmentBytes: 5}
	set.EnsureDefaults()
	if set.Timeout != time.Minute || !set.NoSync || set.SegmentBytes != 5 {
		t.Fatalf("set fields changed: %+v", set)
	}
}

// OpenDir and OpenDirReadOnly default a copy: the caller's options keep
// their zero fields.
func TestDirOptionsNotModified(t *testing.T) {
	var o storage.DirOptions
	dir := t.TempDir()
	s, _, err := storage.OpenDir(dir, idN1, o)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, _, err := storage.OpenDirReadOnly(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if o != (storage.DirOptions{}) {
		t.Fatalf("options modified: %+v", o)
	}
}
