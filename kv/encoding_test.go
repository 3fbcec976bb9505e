package kv

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodingRoundTrip(t *testing.T) {
	for _, o := range []operation{
		{op: opPut, key: "a", value: []byte("v")},
		{op: opPut, request: 1 << 63, key: "ключ", value: nil},
		{op: opDelete, key: "a/b"},
		{op: opCreate, request: 7, key: "k", value: []byte{0, 1, 2}},
		{op: opUpdate, request: 9, key: "k", expected: 1 << 40, value: []byte("x")},
	} {
		got, err := decode(encode(o))
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if got.op != o.op || got.request != o.request || got.key != o.key || got.expected != o.expected || !bytes.Equal(got.value, o.value) {
			t.Errorf("decode(encode(%+v)) = %+v", o, got)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	put := encode(operation{op: opPut, key: "k", value: []byte("v")})
	for name, b := range map[string][]byte{
		"empty":             nil,
		"no magic":          []byte("hello world"),
		"later version":     append([]byte{'K', 'V', 2}, put[3:]...),
		"unknown op":        append([]byte{'K', 'V', 1, 99}, put[4:]...),
		"header only":       put[:4],
		"key past the end":  {'K', 'V', 1, 1, 0, 50, 'k'},
		"empty key":         {'K', 'V', 1, 1, 0, 0, 0},
		"not utf-8":         {'K', 'V', 1, 1, 0, 1, 0xff, 0},
		"no expected":       {'K', 'V', 1, 1, 0, 1, 'k'},
		"delete with value": append(encode(operation{op: opDelete, key: "k"}), 'v'),
		"put expecting":     {'K', 'V', 1, 1, 0, 1, 'k', 5},
		"varint overflow":   {'K', 'V', 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := decode(b); !errors.Is(err, errMalformed) {
			t.Errorf("%s: got %v, want errMalformed", name, err)
		}
	}
}

// FuzzDecode: no entry makes decode panic, and what it accepts encodes
// back to an entry that decodes alike.
func FuzzDecode(f *testing.F) {
	f.Add(encode(operation{op: opPut, key: "k", value: []byte("v")}))
	f.Add(encode(operation{op: opUpdate, request: 3, key: "k", expected: 12, value: []byte("v")}))
	f.Add(encode(operation{op: opDelete, key: "k"}))
	f.Add([]byte("KV\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decode(b)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v does not wrap errMalformed", err)
			}
			return
		}
		again, err := decode(encode(o))
		if err != nil || again.op != o.op || again.request != o.request || again.key != o.key || again.expected != o.expected || !bytes.Equal(again.value, o.value) {
			t.Fatalf("%+v re-encoded decodes as %+v, %v", o, again, err)
		}
	})
}
