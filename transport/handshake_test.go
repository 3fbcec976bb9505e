package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
)

func TestHandshakeRoundTrip(t *testing.T) {
	nonce := [nonceSize]byte{1, 2, 3, 31: 4}
	mac := [macSize]byte{5, 6, 31: 7}
	for _, h := range []handshake{
		{Version: ProtocolVersion, Type: hsHello, Lane: laneControl, ClusterID: "prod", NodeID: "n1"},
		{Version: ProtocolVersion, Type: hsAccept, Lane: laneData, ClusterID: "", NodeID: ""},
		{Version: ProtocolVersion, Type: hsHello, Lane: laneData, ClusterID: strings.Repeat("c", maxIDLen), NodeID: strings.Repeat("n", maxIDLen)},
		{Version: ProtocolVersion, Type: hsRefuseCluster, Lane: laneData},
		{Version: ProtocolVersion, Type: hsRefuse},
		{Version: ProtocolVersion, Type: hsAuthHello, Lane: laneData, NodeID: strings.Repeat("n", maxIDLen), Nonce: nonce},
		{Version: ProtocolVersion, Type: hsChallenge, Nonce: nonce},
		{Version: ProtocolVersion, Type: hsProof, Lane: laneData, MAC: mac},
		{Version: ProtocolVersion, Type: hsAuthAccept, MAC: mac},
	} {
		b := appendHandshake(nil, h)
		got, err := decodeHandshake(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", h, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("got %+v, want %+v", got, h)
		}
		got, err = readHandshake(bytes.NewReader(append(b, 1, 2, 3)))
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("readHandshake: %+v, %v", got, err)
		}
	}
}

func TestHandshakeErrors(t *testing.T) {
	good := appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsHello, ClusterID: "c", NodeID: "n"})
	edit := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		b    []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrBadFrame, "truncated"},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadFrame, "magic"},
		{"version", edit(func(b []byte) []byte { b[4] = 9; return b }), ErrWrongCluster, "version 9"},
		{"crc", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadFrame, "checksum"},
		{"short", good[:len(good)-1], ErrBadFrame, "header says"},
		{"long", append(append([]byte(nil), good...), 0), ErrBadFrame, "header says"},
		{"body too big", edit(func(b []byte) []byte { b[7], b[8] = 0xff, 0xff; return b }), ErrBadFrame, "limit"},
		// A refusal has no body: anything in it is malformed.
		{"refusal with body", withCRC(append(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsRefuse})[:hsFixedSize-2], 0, 2, 'h', 'i')), ErrBadFrame, "trailing"},
		{"short nonce", withCRC(append(append(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsChallenge})[:hsFixedSize-2], 0, 31), make([]byte, 31)...)), ErrBadFrame, "nonce"},
	}
	for _, c := range cases {
		_, err := decodeHandshake(c.b)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v, want %v mentioning %q", c.name, err, c.want, c.msg)
		}
	}
	// Field-level checks behind a valid checksum.
	for _, h := range []handshake{
		{Version: ProtocolVersion, Type: 9},
		{Version: ProtocolVersion, Type: hsHello, Lane: 7},
	} {
		if _, err := decodeHandshake(appendHandshake(nil, h)); !errors.Is(err, ErrBadFrame) {
			t.Errorf("%+v: err = %v, want ErrBadFrame", h, err)
		}
	}
	if err := checkHandshakeFields(handshake{NodeID: strings.Repeat("x", maxIDLen+1)}); err == nil {
		t.Error("a 256-byte node ID passed the check")
	}
}

// FuzzHandshake: no input panics or reads past the limit; whatever
// decodes re-encodes to the same bytes.
func FuzzHandshake(f *testing.F) {
	f.Add(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsHello, Lane: laneData, ClusterID: "c", NodeID: "n"}))
	f.Add(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsRefuseCluster}))
	f.Add(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAuthHello, NodeID: "n", Nonce: [nonceSize]byte{1}}))
	f.Add(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsProof, MAC: [macSize]byte{1}}))
	f.Add(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAccept}))
	f.Add([]byte("RPLG"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandshake(b)
		r := bytes.NewReader(b)
		h2, rerr := readHandshake(r)
		if consumed := len(b) - r.Len(); consumed > hsFixedSize+maxHandshakeBody+crcSize {
			t.Fatalf("readHandshake consumed %d bytes", consumed)
		}
		if err != nil {
			if !errors.Is(err, ErrBadFrame) && !errors.Is(err, ErrWrongCluster) {
				t.Fatalf("error %v wraps neither ErrBadFrame nor ErrWrongCluster", err)
			}
			return
		}
		if rerr != nil || !reflect.DeepEqual(h, h2) {
			t.Fatalf("readHandshake disagrees: %+v %v", h2, rerr)
		}
		if again := appendHandshake(nil, h); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// withCRC appends the checksum to a handshake message's bytes.
func withCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}
