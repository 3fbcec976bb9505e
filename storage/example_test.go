package storage_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// A node's data directory: OpenDir creates it and its identity, one Apply
// stores a mixed batch (a vote, three entries, an HW checkpoint) in one
// transaction, the store reads it back, and a reopen finds the same
// entries and the same identity. Another node may not open it.
func ExampleOpenDir() {
	dir, err := os.MkdirTemp("", "replog-storage-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	me := storage.Identity{ClusterID: "demo", NodeID: "n1"} // DirectoryID: left empty
	s, id, err := storage.OpenDir(dir, me, storage.DirOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created for", id.ClusterID, id.NodeID, "directory ID of", len(id.DirectoryID), "hex digits")

	// What a new leader of epoch 1 writes: its vote, the epoch's control
	// entry, two records, and later the HW it learnt. One Apply: one
	// transaction, whole or absent after a crash.
	err = s.Apply([]protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1, VotedFor: "n1", LeaderID: "n1"}},
		{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
			{Offset: 0, Epoch: 1, Type: protocol.EntryControl},
			{Offset: 1, Epoch: 1, Type: protocol.EntryData, Data: []byte("hello")},
			{Offset: 2, Epoch: 1, Type: protocol.EntryData, Data: []byte("world")},
		}},
		{Kind: protocol.WriteHWCheckpoint, Offset: 2},
	})
	if err != nil {
		log.Fatal(err)
	}
	st := s.Stats()
	fmt.Printf("applies=%d writes=%d commits=%d\n", st.Applies, st.Writes, st.Commits)

	// An invalid batch fails whole: the vote before the bad append is not
	// stored either (the quorum state read below is still epoch 1).
	err = s.Apply([]protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2}},
		{Kind: protocol.WriteAppend, Entries: []protocol.Entry{{Offset: 7, Epoch: 2, Type: protocol.EntryData}}},
	})
	fmt.Println("gap refused:", errors.Is(err, storage.ErrInvalidAppend))

	show := func(s storage.Store) {
		es, err := s.Entries(0, 0, 1<<20) // from offset 0, any count, up to 1 MiB
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range es {
			fmt.Printf("  %d epoch=%d %s %q\n", e.Offset, e.Epoch, e.Type, e.Data)
		}
		q, err := s.QuorumState()
		if err != nil {
			log.Fatal(err)
		}
		hw, ok, err := s.HWCheckpoint()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  LEO=%d epochs=%v quorum=%+v hw=%d,%t\n", s.LEO(), s.EpochMap(), q, hw, ok)
	}
	fmt.Println("read back:")
	show(s)
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	// Reopen: same data, same identity (the DirectoryID was generated
	// once, at creation).
	s, again, err := storage.OpenDir(dir, me, storage.DirOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after reopen:")
	show(s)
	fmt.Println("same directory ID:", again.DirectoryID == id.DirectoryID)
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	// Another node's directory is refused, and left as it was.
	_, _, err = storage.OpenDir(dir, storage.Identity{ClusterID: "demo", NodeID: "n2"}, storage.DirOptions{})
	fmt.Println("n2 refused:", errors.Is(err, storage.ErrIdentityMismatch))

	// Output:
	// created for demo n1 directory ID of 32 hex digits
	// applies=1 writes=3 commits=1
	// gap refused: true
	// read back:
	//   0 epoch=1 control ""
	//   1 epoch=1 data "hello"
	//   2 epoch=1 data "world"
	//   LEO=3 epochs=[{1 0}] quorum={Epoch:1 VotedFor:n1 LeaderID:n1} hw=2,true
	// after reopen:
	//   0 epoch=1 control ""
	//   1 epoch=1 data "hello"
	//   2 epoch=1 data "world"
	//   LEO=3 epochs=[{1 0}] quorum={Epoch:1 VotedFor:n1 LeaderID:n1} hw=2,true
	// same directory ID: true
	// n2 refused: true
}

// The voter-set rows (docs/protocol.md R55): each voters entry adds one; a
// truncation below one brings back the set before it; retention deletes
// the entries but keeps, below the new log start, the newest row (the set
// in force there) and the newest change before it.
func ExampleMemory_VoterSets() {
	s := storage.NewMemory()
	voters := func(off uint64, ids ...string) protocol.Entry {
		var vs []protocol.Voter
		for _, id := range ids {
			vs = append(vs, protocol.Voter{ID: id, DirID: "dir-" + id})
		}
		return protocol.Entry{Offset: off, Epoch: 1, Type: protocol.EntryVoters, Data: protocol.EncodeVoters(vs)}
	}
	data := func(off uint64) protocol.Entry {
		return protocol.Entry{Offset: off, Epoch: 1, Type: protocol.EntryData, Data: []byte("x")}
	}
	show := func(when string) {
		fmt.Printf("%s: log [%d, %d)", when, s.LogStart(), s.LEO())
		for _, r := range s.VoterSets() {
			fmt.Printf(" %d:%d voters", r.Offset, len(r.Voters))
		}
		fmt.Println()
	}
	if err := s.Append([]protocol.Entry{voters(0, "n1"), data(1), voters(2, "n1", "n2"), data(3), voters(4, "n1", "n2", "n3"), data(5)}); err != nil {
		log.Fatal(err)
	}
	show("appended")
	if err := s.TruncateSuffix(4); err != nil {
		log.Fatal(err)
	}
	show("truncated")
	if err := s.DeletePrefix(3); err != nil {
		log.Fatal(err)
	}
	show("deleted")
	if err := s.Append([]protocol.Entry{voters(4, "n1", "n3"), data(5), data(6)}); err != nil {
		log.Fatal(err)
	}
	if err := s.DeletePrefix(6); err != nil {
		log.Fatal(err)
	}
	show("deleted again")
	err := s.Append([]protocol.Entry{{Offset: 7, Epoch: 1, Type: protocol.EntryVoters, Data: []byte("not a set")}})
	fmt.Println("malformed set refused:", errors.Is(err, storage.ErrInvalidAppend))

	// Output:
	// appended: log [0, 6) 0:1 voters 2:2 voters 4:3 voters
	// truncated: log [0, 4) 0:1 voters 2:2 voters
	// deleted: log [3, 4) 0:1 voters 2:2 voters
	// deleted again: log [6, 7) 2:2 voters 4:2 voters
	// malformed set refused: true
}
