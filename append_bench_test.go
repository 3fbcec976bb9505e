package replog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAppendIdempotence: one node (fsync off), 64 and 256 goroutines
// appending 128-byte records with Append, idempotent (the default: a
// producer key per append, R63) and with Options.DisableIdempotence, in
// the same run. One op is one acknowledged append.
func BenchmarkAppendIdempotence(b *testing.B) {
	for _, clients := range []int{64, 256} {
		for _, idem := range []bool{false, true} {
			b.Run(fmt.Sprintf("clients=%d/idempotent=%t", clients, idem), func(b *testing.B) {
				l, err := Open(Options{Dir: b.TempDir(), NoSync: true, DisableIdempotence: !idem})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := l.WaitReady(ctx); err != nil {
					b.Fatal(err)
				}
				rec := make([]byte, 128)
				var left atomic.Int64
				left.Store(int64(b.N))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for left.Add(-1) >= 0 {
							if _, err := l.Append(ctx, rec); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
			})
		}
	}
}
