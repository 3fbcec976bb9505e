package kvstate

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodingRoundTrip(t *testing.T) {
	for _, o := range []Operation{
		{Op: OpPut, Key: "a", Value: []byte("v")},
		{Op: OpPut, Request: 1 << 63, Key: "ключ", Value: nil},
		{Op: OpDelete, Key: "a/b"},
		{Op: OpCreate, Request: 7, Key: "k", Value: []byte{0, 1, 2}},
		{Op: OpUpdate, Request: 9, Key: "k", Expected: 1 << 40, Value: []byte("x")},
	} {
		got, err := Decode(Encode(o))
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if got.Op != o.Op || got.Request != o.Request || got.Key != o.Key || got.Expected != o.Expected || !bytes.Equal(got.Value, o.Value) {
			t.Errorf("Decode(Encode(%+v)) = %+v", o, got)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	put := Encode(Operation{Op: OpPut, Key: "k", Value: []byte("v")})
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
		"delete with value": append(Encode(Operation{Op: OpDelete, Key: "k"}), 'v'),
		"put expecting":     {'K', 'V', 1, 1, 0, 1, 'k', 5},
		"varint overflow":   {'K', 'V', 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzDecode: no entry makes Decode panic, and what it accepts encodes
// back to an entry that decodes alike.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(Operation{Op: OpPut, Key: "k", Value: []byte("v")}))
	f.Add(Encode(Operation{Op: OpUpdate, Request: 3, Key: "k", Expected: 12, Value: []byte("v")}))
	f.Add(Encode(Operation{Op: OpDelete, Key: "k"}))
	f.Add([]byte("KV\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := Decode(Encode(o))
		if err != nil || again.Op != o.Op || again.Request != o.Request || again.Key != o.Key || again.Expected != o.Expected || !bytes.Equal(again.Value, o.Value) {
			t.Fatalf("%+v re-encoded decodes as %+v, %v", o, again, err)
		}
	})
}
