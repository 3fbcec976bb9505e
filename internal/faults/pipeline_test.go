package faults

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 13's exactly-once pipeline as real processes: the observer o1
// runs the example with -pipeline in-=out- (pipeline.go there: it reads
// the committed log from its cursor, appends each input's output under an
// ID derived from the input's offset, commits the cursor), and is
// SIGKILLed and started again over and over while a feeder appends the
// inputs through the voters (each with its Idempotency-Key, retried until
// acknowledged) and, now and then, the leader is SIGKILLed too.

var flagPipelineKillEvery = flag.Duration("faults.pipeline-kill-every", 400*time.Millisecond,
	"TestPipelineExactlyOnce: SIGKILL the pipeline's process about this often (0.5x to 1.5x) and start it again at once; every 4th kill takes the leader too")

// pipelineDuration is TestPipelineExactlyOnce's feeding time unless
// -faults.duration is given: short, because it runs in the default run
// (with -faults.pipeline-kill-every's default, about 20 kills).
const pipelineDuration = 8 * time.Second

// pipelineCursor is the pipeline's cursor name (-pipeline-cursor).
const pipelineCursor = "pipe"

// TestPipelineExactlyOnce: after the feeding, the kills and the
// pipeline's catching up (its cursor past the last input), every node's
// log holds every acknowledged input once and, for each input in the log,
// exactly one output, and no output without its input. The inputs pass
// the checker (no lost write, no duplicate).
func TestPipelineExactlyOnce(t *testing.T) {
	t.Parallel()
	o := testRunOpts(t)
	o.pkg = "./example" // the fake node has no pipeline
	o.cfg.Duration = pipelineDuration
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "faults.duration" {
			o.cfg.Duration = *flagDuration
		}
	})
	o.observers = 1
	o.observerArgs = []string{"-pipeline", "in-=out-", "-pipeline-cursor", pipelineCursor}
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.Duration+5*time.Minute)
	defer cancel()
	c, _, _ := startRunCluster(ctx, t, o)
	var pipe *Node
	for _, n := range c.Nodes {
		if n.Observer {
			pipe = n
		}
	}
	h := NewHistory()
	rng := rand.New(rand.NewSource(o.cfg.Seed))

	// The killer: the pipeline's process, and every 4th time the leader.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	kills, leaderKills := 0, 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(o.cfg.Seed + 1)) // the feeder has its own
		every := *flagPipelineKillEvery
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(every/2 + time.Duration(rng.Int63n(int64(every)+1))):
			}
			victims := []*Node{pipe}
			if i%4 == 0 {
				lctx, cancel := context.WithTimeout(ctx, time.Second)
				if l, _ := c.Leader(lctx); l != nil && l != pipe {
					victims = append(victims, l)
					leaderKills++
				}
				cancel()
			}
			killed := c.Kill(victims...)
			for _, n := range killed {
				h.AddEvent(Event{Kind: "kill", Nodes: []string{n.ID}, Leader: n != pipe})
				if n == pipe {
					kills++
				}
			}
			for _, n := range victims {
				if err := c.Start(n); err != nil {
					t.Errorf("restarting %s: %v", n.ID, err)
				}
				h.AddEvent(Event{Kind: "restart", Nodes: []string{n.ID}})
			}
		}
	}()

	// The feeder: inputs in-0, in-1, ... through random voters, each
	// retried with its key until acknowledged (the last one also after
	// the feeding time, so that every input is acknowledged).
	voters := c.Voters()
	feedCtx, stopFeeding := context.WithTimeout(ctx, o.cfg.Duration)
	defer stopFeeding()
	inputs := 0
	var lastInput uint64
	for k := 0; feedCtx.Err() == nil; k++ {
		payload := fmt.Sprintf("in-%d", k)
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil {
				t.Fatalf("%s never acknowledged", payload)
			}
			n := voters[rng.Intn(len(voters))]
			id := h.InvokeKey(0, n.ID, payload, payload, attempt)
			actx, cancel := context.WithTimeout(ctx, o.cfg.AppendTimeout)
			res := c.AppendKey(actx, n, EncodePayload(payload, 0), payload)
			cancel()
			h.CompleteAppend(id, res)
			if res.Outcome == OK {
				inputs++
				lastInput = max(lastInput, res.Offset)
				break
			}
			time.Sleep(time.Duration(20+rng.Intn(80)) * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	// The pipeline, running again, catches up: its cursor passes the
	// last input.
	caughtUp := time.Now()
	deadline := caughtUp.Add(o.cfg.ConvergeTimeout)
	var next uint64
	for {
		if !pipe.Running() {
			if err := c.Start(pipe); err != nil {
				t.Fatalf("restarting the pipeline: %v", err)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		n, ok, err := c.Cursor(cctx, voters[0], pipelineCursor)
		cancel()
		if err == nil && ok {
			next = n
		}
		if next > lastInput {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline's cursor is at %d, the last input at %d, %v after the feeding (last error %v)", next, lastInput, o.cfg.ConvergeTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	drain := time.Since(caughtUp)
	finals, err := converge(ctx, c, time.Now().Add(o.cfg.ConvergeTimeout))
	if err != nil {
		t.Errorf("nodes did not converge: %v", err)
	}
	if len(finals) == 0 {
		t.Fatal("no final log read")
	}

	// Every node: each input once (the checker, on the inputs alone),
	// each input's output once, no other output.
	var inputFinals []FinalLog
	for _, f := range finals {
		in, ins, outs := f, map[string]int{}, map[string]int{}
		in.Entries = nil
		for _, e := range f.Entries {
			switch {
			case strings.HasPrefix(e.Payload, "in-"):
				in.Entries = append(in.Entries, e)
				ins[strings.TrimPrefix(e.Payload, "in-")]++
			case strings.HasPrefix(e.Payload, "out-"):
				outs[strings.TrimPrefix(e.Payload, "out-")]++
			default:
				t.Errorf("%s: unexpected entry %d %q", f.Node, e.Offset, e.Payload)
			}
		}
		inputFinals = append(inputFinals, in)
		var missing, dup, stray []string
		for k := range ins {
			switch outs[k] {
			case 0:
				missing = append(missing, k)
			case 1:
			default:
				dup = append(dup, fmt.Sprintf("%s x%d", k, outs[k]))
			}
		}
		for k := range outs {
			if ins[k] == 0 {
				stray = append(stray, k)
			}
		}
		if len(missing)+len(dup)+len(stray) > 0 {
			t.Errorf("%s: %d inputs, %d outputs: %d inputs without an output (e.g. %v), %d with several (e.g. %v), %d outputs without an input (e.g. %v)",
				f.Node, len(ins), len(outs), len(missing), head(missing), len(dup), head(dup), len(stray), head(stray))
		}
	}
	res := Check(h.Ops, nil, inputFinals)
	if !res.OK() || res.Counts[DuplicateRetried] > 0 {
		t.Errorf("the inputs: %s", res.Summary())
	}

	logText, _ := os.ReadFile(pipe.logPath)
	resumes := strings.Count(string(logText), "pipeline resumes")
	redone := strings.Count(string(logText), "pipeline output already appended")
	oc := outcomeStats(h.Ops)
	t.Logf("pipeline: %d inputs acknowledged (%d appends answered as duplicates; unknown outcomes by cause %v); %d SIGKILLs of the pipeline (%d with the leader); %d resumes from the cursor, %d outputs found already appended on a redo (deduplicated by ID); caught up %v after the feeding; final log of %d entries",
		inputs, oc.Replayed, oc.UnknownByCause, kills, leaderKills, resumes, redone, drain.Round(time.Millisecond), len(finals[0].Entries))
	if kills == 0 || resumes < 2 {
		t.Errorf("the pipeline was killed %d times and resumed %d times: the run did not test restarts", kills, resumes)
	}
	if inputs == 0 {
		t.Errorf("no input was acknowledged")
	}
}

// head returns the first few of xs.
func head(xs []string) []string { return xs[:min(len(xs), 5)] }
