package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// floorSamples is how many times the floor measures each of its parts.
const floorSamples = 200

// floor is what one commit cannot beat on this machine: a 4 KiB write and
// fdatasync of a preallocated file in the run's directory (a commit
// journal's write) and a loopback TCP round trip of a small message (a
// fetch's answer and the next fetch), each the median of floorSamples.
// With fsync on, a 1-client commit costs one of each on the follower, the
// leader's own write overlapping them.
type floor struct {
	sync, rtt time.Duration
}

func (f floor) String() string {
	return fmt.Sprintf("floor: 4KiB write+fdatasync p50 %v, loopback round trip p50 %v, sum %v",
		f.sync.Round(time.Microsecond), f.rtt.Round(time.Microsecond), (f.sync + f.rtt).Round(time.Microsecond))
}

// measureFloor measures the floor in dir.
func measureFloor(dir string) (floor, error) {
	var f floor
	var err error
	if f.sync, err = syncFloor(dir); err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	if f.rtt, err = rttFloor(); err != nil {
		return f, fmt.Errorf("floor: %w", err)
	}
	return f, nil
}

func syncFloor(dir string) (time.Duration, error) {
	path := filepath.Join(dir, "floor.tmp")
	file, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer file.Close()
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	// Preallocated and synced first, so that each sample overwrites
	// allocated blocks, as the journal's ring does.
	if _, err := file.Write(make([]byte, floorSamples*len(buf))); err != nil {
		return 0, err
	}
	if err := file.Sync(); err != nil {
		return 0, err
	}
	lat := make([]time.Duration, 0, floorSamples)
	for i := range floorSamples {
		start := time.Now()
		if _, err := file.WriteAt(buf, int64(i*len(buf))); err != nil {
			return 0, err
		}
		if err := fdatasync(file); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(start))
	}
	return median(lat), nil
}

func rttFloor() (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	msg := make([]byte, 64)
	lat := make([]time.Duration, 0, floorSamples)
	for range floorSamples {
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, msg); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(start))
	}
	return median(lat), nil
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
