package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The pread path (platforms without mmap) finds what the mapped path
// finds: the same verdict and message on the same damaged files.
func TestVerifyPreadMatchesMapped(t *testing.T) {
	tmpl := fuzzTemplate(t)
	rng := rand.New(rand.NewPCG(1, 2))
	path := filepath.Join(t.TempDir(), "v.db")
	corrupt := 0
	for i := 0; i < 300; i++ {
		data := bytes.Clone(tmpl)
		switch i % 3 {
		case 0: // one byte
			data[rng.IntN(len(data))] ^= byte(1 + rng.IntN(255))
		case 1: // a run of garbage
			off := rng.IntN(len(data))
			for j := off; j < min(len(data), off+1+rng.IntN(64)); j++ {
				data[j] = byte(rng.Uint32())
			}
		case 2: // truncation
			data = data[:rng.IntN(len(data))]
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		mapped := verifyBoltFile(f, int64(len(data)))
		pread := (&verifier{r: f, size: int64(len(data))}).run()
		f.Close()
		if (mapped == nil) != (pread == nil) || (mapped != nil && mapped.Error() != pread.Error()) {
			t.Fatalf("case %d: mapped %v, pread %v", i, mapped, pread)
		}
		if mapped != nil {
			if !errors.Is(mapped, ErrCorrupt) {
				t.Fatalf("case %d: %v is not ErrCorrupt", i, mapped)
			}
			corrupt++
		}
	}
	if corrupt == 0 {
		t.Fatal("no damage detected at all")
	}
	t.Logf("%d of 300 damaged files refused", corrupt)
}
