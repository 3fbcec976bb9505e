package replica_test

import (
	"fmt"
	"log"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// A single-voter replica, driven by the smallest possible shell: it applies
// each Ready's writes to the store in one Apply, reports them persisted,
// and delivers the acks. (A real shell also sends rd.Messages and calls Tick;
// a single voter has nobody to talk to.)
func Example() {
	store := storage.NewMemory()
	now := time.Unix(0, 0)
	r, err := replica.New(replica.Config{ID: "n1", Voters: []string{"n1"}}, store, now)
	if err != nil {
		log.Fatal(err)
	}

	// handle does one round of the shell's loop.
	handle := func(rd replica.Ready) {
		// All of the round's writes in one transaction (group commit).
		if err := store.Apply(rd.Writes); err != nil {
			// A lost write is fatal for this Replica: stop it.
			log.Fatal(err)
		}
		if n := len(rd.Writes); n > 0 {
			r.Persisted(rd.Writes[n-1].Seq)
		}
		for _, a := range rd.Acks {
			if a.Err != nil {
				fmt.Printf("proposal %d failed: %v\n", a.ID, a.Err)
				continue
			}
			fmt.Printf("proposal %d committed at offset %d\n", a.ID, a.FirstOffset)
		}
	}

	// Its first Ready holds the durable self-vote of a new epoch.
	handle(r.Ready())
	st := r.Status()
	fmt.Println(st.Role, "of epoch", st.Epoch)

	r.Propose(1, [][]byte{[]byte("hello"), []byte("world")})
	handle(r.Ready()) // writes the records; Persisted moves the HW past them
	handle(r.Ready()) // hands out the ack

	entries, err := store.Entries(0, 0, 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		if e.Type == protocol.EntryVoters {
			// The first leader records the voter set (each voter with the
			// directory ID of its store; Config.DirID, here the default).
			vs, _ := protocol.DecodeVoters(e.Data)
			fmt.Printf("%d: voters %v\n", e.Offset, vs)
			continue
		}
		fmt.Printf("%d: %s\n", e.Offset, e.Data)
	}
	fmt.Println("HW", r.HighWatermark())
	// Output:
	// leader of epoch 1
	// proposal 1 committed at offset 1
	// 0: voters [{n1 n1}]
	// 1: hello
	// 2: world
	// HW 3
}
