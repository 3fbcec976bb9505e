package protocol_test

import (
	"fmt"

	"github.com/replog-io/replog/protocol"
)

// A message encoded with AppendMessage decodes back to an equal message.
// A transport puts its own framing (length, checksum) around these bytes.
func Example() {
	m := protocol.Message{From: "n2", To: "n1", Body: &protocol.FetchResponse{
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
	b[0] = 9
	_, err = protocol.DecodeMessage(b)
	fmt.Println(err)
	// Output:
	// true FetchResponse
	// n2->n1 FetchResp{id=7 leader=n1 epoch=3 ok hw=2 start=0 entries=1}
	// hello
	// replog: malformed message: version 9, want 6..8
}
