package main

import (
	"fmt"
	"io"
	"net"
	"time"
)

// loopbackMBPerSec measures this machine's loopback TCP rate: one
// connection on 127.0.0.1, 1 MiB writes for d, read and discarded. It is
// the ceiling a consumer on the same machine could reach, the baseline for
// consume throughput (docs/performance.md).
func loopbackMBPerSec(d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	n := <-got
	secs := time.Since(start).Seconds()
	if n == 0 {
		return 0, fmt.Errorf("loopback: nothing read")
	}
	return float64(n) / secs / 1e6, nil
}
