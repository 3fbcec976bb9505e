package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// BenchmarkCoreThroughputKeyed is BenchmarkCoreThroughput with every
// proposal keyed (R61-R63: one producer, a sequence number each, Low the
// batch's first): the core's cost of idempotence. keyed=false is the
// baseline, measured in the same run.
func BenchmarkCoreThroughputKeyed(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		for _, batch := range []int{1, 256} {
			b.Run(fmt.Sprintf("keyed=%t/batch=%d", keyed, batch), func(b *testing.B) {
				c := newBenchCluster(b, []string{"l", "a", "b"})
				leader := c.nodes["l"].r
				rec := make([]byte, 128)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				var id uint64
				for done := 0; done < b.N; {
					n := min(batch, b.N-done)
					low := id + 1
					for range n {
						id++
						if keyed {
							leader.ProposeKeyed(id, protocol.Key{Producer: 1, Seq: id, Low: low}, [][]byte{rec})
						} else {
							leader.Propose(id, [][]byte{rec})
						}
					}
					c.run(b)
					done += n
				}
				elapsed := time.Since(start)
				b.StopTimer()
				if c.acked != b.N || c.failed != 0 {
					b.Fatalf("acked %d failed %d of %d", c.acked, c.failed, b.N)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
			})
		}
	}
}
