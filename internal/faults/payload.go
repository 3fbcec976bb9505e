package faults

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// EncodePayload returns the record appended for the logical append id:
// "id|n|" followed by n filler bytes derived from id. Records are unique
// (by id) and self-checking: any change to a stored or served record (a
// torn, shifted or mixed-up entry) makes DecodePayload fail. Sizes vary so
// that fetch responses are split by their byte limit now and then.
func EncodePayload(id string, n int) string {
	var b strings.Builder
	b.Grow(len(id) + 12 + n)
	b.WriteString(id)
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(n))
	b.WriteByte('|')
	seed := fillerSeed(id)
	for i := 0; i < n; i++ {
		b.WriteByte(fillerByte(seed, i))
	}
	return b.String()
}

// DecodePayload returns the id of a record made by EncodePayload, or, if
// the record is not intact, "corrupt:" and a quoted prefix of it (which no
// op has, so the checker reports it wherever it is seen). The id is a copy:
// a history keeps millions of them, and a substring would keep each whole
// record alive with it.
func DecodePayload(rec string) string {
	id, rest, ok1 := strings.Cut(rec, "|")
	num, filler, ok2 := strings.Cut(rest, "|")
	n, err := strconv.Atoi(num)
	if !ok1 || !ok2 || err != nil || n != len(filler) {
		return corrupt(rec)
	}
	seed := fillerSeed(id)
	for i := 0; i < n; i++ {
		if filler[i] != fillerByte(seed, i) {
			return corrupt(rec)
		}
	}
	return strings.Clone(id)
}

func corrupt(rec string) string {
	return fmt.Sprintf("corrupt:%q(len %d)", truncate(rec, 40), len(rec))
}

func fillerSeed(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

func fillerByte(seed uint32, i int) byte {
	return 'a' + byte((seed+uint32(i)*2654435761>>7)%26)
}
