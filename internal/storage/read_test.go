package storage

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/internal/vfs"
)

// TestWriteToSendfile sends a multi-segment slice over a real TCP connection
// (sendfile path) and through a plain writer (copy path).
func TestWriteToSendfile(t *testing.T) {
	cfg := testConfig()
	l, err := Open(vfs.Default, t.TempDir()+"/t-0", cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	all := bytes.Join(appendN(t, l, 30, 2, 300, 1), nil)
	sl, err := l.Read(0, 1<<20, 1<<62)
	if err != nil || len(sl.Chunks) < 2 {
		t.Fatalf("want a multi-chunk slice: %d chunks, %v", len(sl.Chunks), err)
	}
	want, _ := sl.AppendTo(nil)
	if !bytes.HasPrefix(all, want) || len(want) < 4096 {
		t.Fatalf("slice of %d bytes is not a prefix of the log", len(want))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip("no loopback TCP:", err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, err := sl.WriteTo(conn)
	conn.Close()
	if err != nil || n != int64(len(want)) {
		t.Fatalf("WriteTo = %d, %v", n, err)
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("sendfile sent different bytes")
	}
	var buf bytes.Buffer
	if _, err := sl.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("copy path: %v", err)
	}
}

// TestConcurrentReadAppend reads while appending (run with -race): every
// read returns whole, valid, contiguous batches.
func TestConcurrentReadAppend(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), testConfig())
	defer l.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				readAll(t, l)
				l.OffsetForTimestamp(t0.UnixMilli() + 5)
			}
		}()
	}
	for i := 0; i < 300; i++ {
		if _, err := l.AppendAssigning(mkBatch(plain(2, 50, t0.UnixMilli()+int64(i))), 0, t0); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			l.Sync()
		}
	}
	close(stop)
	wg.Wait()
	if got := len(readAll(t, l)); got != 300 {
		t.Fatalf("%d batches", got)
	}
	if off, ts, ok, _ := l.MaxTimestamp(); !ok || off != 599 || ts != t0.UnixMilli()+300 {
		t.Fatalf("MaxTimestamp = %d, %d, %v", off, ts, ok)
	}
}
