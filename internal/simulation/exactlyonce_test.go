package simulation

import (
	"flag"
	"testing"
)

var flagEOSeeds = flag.Int("sim.eoseeds", 24, "seeds TestSimulationExactlyOnce runs (from -sim.start)")

// TestSimulationExactlyOnce runs the exactly-once workload (exactlyonce.go)
// over the full nemesis: every acknowledged append, retried across leader
// changes, lost answers and restarts, is committed once, at the offset
// every ack of it named. Reproduce a seed with
// go test ./internal/simulation -run 'TestSimulation$' -sim.exactlyonce -sim.seed=N.
func TestSimulationExactlyOnce(t *testing.T) {
	var retries, acked int
	for seed := *flagStart; seed < *flagStart+int64(*flagEOSeeds); seed++ {
		o := runOpts(seed, *flagSteps)
		o.ExactlyOnce = true
		res := Run(o)
		if res.Err != nil {
			t.Errorf("seed %d: %v\n  reproduce: go test ./internal/simulation -run 'TestSimulation$' -sim.exactlyonce -sim.seed=%d -sim.steps=%d -sim.trace",
				seed, res.Err, seed, *flagSteps)
			continue
		}
		retries += res.Retries
		acked += res.Acked
	}
	t.Logf("%d seeds: %d appends acknowledged, %d retries", *flagEOSeeds, acked, retries)
	if retries == 0 {
		t.Fatal("no append was retried: the workload proves nothing")
	}
}
