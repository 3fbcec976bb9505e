package fetcher_test

import (
	"fmt"
	"time"

	"github.com/replog-io/replog/fetcher"
	"github.com/replog-io/replog/protocol"
)

// memLog is a follower's log view for the example: the entries' epochs,
// offset by offset.
type memLog struct{ epochs []uint64 }

func (l *memLog) LEO() uint64 { return uint64(len(l.epochs)) }

func (l *memLog) LastEntryEpoch() uint64 {
	if len(l.epochs) == 0 {
		return 0
	}
	return l.epochs[len(l.epochs)-1]
}

func (l *memLog) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if e := l.epochs[i]; e <= epoch {
			return e, uint64(i) + 1
		}
	}
	return 0, 0
}

// A follower of epoch 2 with two entries of epoch 1 fetches from its
// leader n1 twice: the first answer says the logs diverge after offset 1
// (KIP-279), the second brings the leader's entries.
func Example() {
	log := &memLog{epochs: []uint64{1, 1}}
	f := fetcher.New("n2", 1<<20, 500*time.Millisecond, 1)
	now := time.Unix(0, 0)

	req := f.Build("n1", 2, log, now)
	fmt.Printf("fetch %d: offset %d, last epoch %d\n", req.FetchID, req.FetchOffset, req.LastFetchedEpoch)
	d := f.Handle("n1", &protocol.FetchResponse{
		FetchID: req.FetchID, LeaderID: "n1", Epoch: 2, Error: protocol.FetchDivergingEpoch,
		DivergingEpoch: 1, DivergingEndOffset: 1,
	}, 2, "n1", log)
	fmt.Println(d.Action, "to", d.TruncateTo)
	log.epochs = log.epochs[:d.TruncateTo]

	req = f.Build("n1", 2, log, now)
	fmt.Printf("fetch %d: offset %d, last epoch %d\n", req.FetchID, req.FetchOffset, req.LastFetchedEpoch)
	resp := &protocol.FetchResponse{
		FetchID: req.FetchID, LeaderID: "n1", Epoch: 2, Error: protocol.FetchOK, HighWatermark: 2,
		Entries: []protocol.Entry{{Offset: 1, Epoch: 2, Type: protocol.EntryData, Data: []byte("x")}},
	}
	// A copy with another FetchID (late, repeated or forged) decides
	// nothing.
	stale := *resp
	stale.FetchID = 99
	fmt.Println(f.Handle("n1", &stale, 2, "n1", log).Action)
	d = f.Handle("n1", resp, 2, "n1", log)
	fmt.Println(d.Action, len(d.Entries), "entries, HW", d.HighWatermark)
	// Output:
	// fetch 1: offset 2, last epoch 1
	// truncate to 1
	// fetch 2: offset 1, last epoch 1
	// drop
	// append 1 entries, HW 2
}
