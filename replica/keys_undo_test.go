package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeyUndoReusesItsArray: pushUndo moves the live undo records down
// its array instead of allocating (records are dropped from the front each
// round, keysCatchUp, and from the back by a truncation, keysTruncated);
// checked against a plain slice over random rounds.
func TestKeyUndoReusesItsArray(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tb keyTable
	var model []uint64
	off := uint64(0)
	arrays := 0 // arrays allocated
	for round := range 5000 {
		for range rng.IntN(40) {
			before := cap(tb.undo) + len(tb.undoArr)
			var first *keyUndo
			if len(tb.undoArr) > 0 {
				first = &tb.undoArr[0]
			}
			tb.pushUndo(keyUndo{off: off})
			if len(tb.undoArr) > 0 && (&tb.undoArr[0] != first || before == 0) {
				arrays++
			}
			model = append(model, off)
			off++
		}
		switch rng.IntN(4) {
		case 0: // a truncation
			k := rng.IntN(len(model) + 1)
			tb.undo = tb.undo[:len(tb.undo)-k]
			model = model[:len(model)-k]
		default: // committed records dropped, as keysCatchUp does
			n := rng.IntN(len(model) + 1)
			clear(tb.undo[:n])
			tb.undo = tb.undo[n:]
			model = model[n:]
		}
		got := make([]uint64, len(tb.undo))
		for i, u := range tb.undo {
			got[i] = u.off
		}
		if !slices.Equal(got, model) {
			t.Fatalf("round %d: undo %v, want %v", round, got, model)
		}
	}
	// Only while the live records grow past the array's size (a few
	// doublings), not once per fill of the array.
	if arrays > 50 { // 13 as written; 2337 when every full array is replaced
		t.Fatalf("%d undo arrays allocated over 5000 rounds of at most ~200 live records", arrays)
	}
}
