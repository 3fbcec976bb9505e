package protocol_test

import (
	"errors"
	"fmt"

	"github.com/replog-io/replog/protocol"
)

// A message encoded with AppendMessage decodes back to an equal message.
// A transport puts its own framing (length, checksum) around these bytes.
// This one belongs to the named log "orders" (Log "" is the default log's).
func Example() {
	m := protocol.Message{From: "n2", To: "n1", Log: "orders", Body: &protocol.FetchResponse{
		FetchID:       7,
		LeaderID:      "n1",
		Epoch:         3,
		HighWatermark: 2,
		Entries: []protocol.Entry{
			{Offset: 1, Epoch: 3, Type: protocol.EntryData, Data: []byte("hello")},
		},
	}}
	b, err := protocol.AppendMessage(nil, m)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(b) == protocol.EncodedSize(m), protocol.KindOf(b))

	got, err := protocol.DecodeMessage(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(got)
	fmt.Printf("%s\n", got.Body.(*protocol.FetchResponse).Entries[0].Data)

	// A damaged message is refused, never misread.
	b[0] = 99
	_, err = protocol.DecodeMessage(b)
	fmt.Println(err)

	// A peer that speaks only wire version 8 cannot be told the log's
	// name: the message is refused rather than sent as the default log's.
	_, err = protocol.AppendMessageAt(nil, m, 8)
	fmt.Println(errors.Is(err, protocol.ErrLogNameVersion))
	// Output:
	// true FetchResponse
	// n2->n1 [orders] FetchResp{id=7 leader=n1 epoch=3 ok hw=2 start=0 entries=1}
	// hello
	// replog: malformed message: version 99, want 6..10
	// true
}
