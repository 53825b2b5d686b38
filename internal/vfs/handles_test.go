package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

func readAllAt(t *testing.T, f File) []byte {
	t.Helper()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// Both the in-memory and the OS filesystem: more files than the limit stay
// usable, and no more than the limit are open between operations.
func TestHandleCacheBoundsOpenHandles(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		dir  string
	}{{"mem", NewMem(), "/d"}, {"os", Default, t.TempDir()}} {
		t.Run(tc.name, func(t *testing.T) {
			c := WithHandleCache(tc.fs, 4)
			if err := c.MkdirAll(tc.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			var files []File
			for i := range 50 {
				f, err := c.Create(filepath.Join(tc.dir, fmt.Sprint(i)))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
				if _, err := f.Write([]byte(fmt.Sprintf("file %d;", i))); err != nil {
					t.Fatal(err)
				}
			}
			for round := range 3 {
				for i, f := range files {
					if _, err := f.Write([]byte(fmt.Sprintf("r%d;", round))); err != nil {
						t.Fatal(err)
					}
					if st := c.Stats(); st.Open > 4 {
						t.Fatalf("%d handles open, limit 4", st.Open)
					}
					_ = i
				}
			}
			for i, f := range files {
				want := fmt.Sprintf("file %d;r0;r1;r2;", i)
				if got := readAllAt(t, f); string(got) != want {
					t.Fatalf("file %d = %q, want %q", i, got, want)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			st := c.Stats()
			if st.Evictions == 0 || st.Opens <= 50 {
				t.Fatalf("stats %+v: expected evictions and reopens", st)
			}
			for _, f := range files {
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if st := c.Stats(); st.Open != 0 {
				t.Fatalf("%d handles open after closing every file", st.Open)
			}
		})
	}
}

// A removed or replaced name stays readable through a File opened before,
// even when that File's handle had been closed to make room.
func TestHandleCacheRemoveAndRenameKeepPOSIXMeaning(t *testing.T) {
	dir := t.TempDir()
	c := WithHandleCache(Default, 2)
	name := func(s string) string { return filepath.Join(dir, s) }
	mk := func(n, data string) File {
		f, err := c.Create(name(n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	a, b, old := mk("a", "AAA"), mk("b", "BBB"), mk("c", "OLD")
	for i := range 5 { // evict a, b and c
		mk(fmt.Sprint("x", i), "x").Close()
	}
	if err := c.Remove(name("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(name("b"), name("c")); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		mk(fmt.Sprint("y", i), "y").Close()
	}
	if got := readAllAt(t, a); string(got) != "AAA" {
		t.Fatalf("removed file reads %q", got)
	}
	if got := readAllAt(t, old); string(got) != "OLD" {
		t.Fatalf("replaced file reads %q", got)
	}
	if _, err := b.Write([]byte("+")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(name("c")); string(got) != "BBB+" {
		t.Fatalf("renamed file on disk = %q, want BBB+", got)
	}
	if _, err := os.Stat(name("b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old name recreated: %v", err)
	}
	if _, err := os.Stat(name("a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed name recreated: %v", err)
	}
	for _, f := range []File{a, b, old} {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := a.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if st := c.Stats(); st.Open != 0 {
		t.Fatalf("%d handles open", st.Open)
	}
}

// Running out of descriptors closes every idle handle and retries.
func TestHandleCacheRetriesOnEMFILE(t *testing.T) {
	var fail atomic.Int32
	inj := InjectorFunc(func(op Op, name string) error {
		if (op == OpOpen || op == OpCreate) && fail.Add(-1) >= 0 {
			return &os.PathError{Op: "open", Path: name, Err: syscall.EMFILE}
		}
		return nil
	})
	c := WithHandleCache(WithFaults(NewMem(), inj), 100)
	var files []File
	for i := range 10 {
		f, err := c.Create(fmt.Sprint("/f", i))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	fail.Store(1)
	f, err := c.Create("/g")
	if err != nil {
		t.Fatalf("create after one EMFILE: %v", err)
	}
	if st := c.Stats(); st.Open != 1 {
		t.Fatalf("%d open after the retry, want only the new one", st.Open)
	}
	fail.Store(2)
	if _, err := files[0].Write([]byte("z")); !IsOutOfDescriptors(err) {
		t.Fatalf("write with no descriptor: %v, want EMFILE", err)
	}
	if _, err := files[0].Write([]byte("z")); err != nil {
		t.Fatalf("write once descriptors are back: %v", err)
	}
	f.Close()
}

// Concurrent readers and writers over more files than handles.
func TestHandleCacheConcurrent(t *testing.T) {
	c := WithHandleCache(NewMem(), 3)
	const files, writes = 8, 200
	fs := make([]File, files)
	for i := range fs {
		f, err := c.Create(fmt.Sprint("/c", i))
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = f
	}
	var wg sync.WaitGroup
	for i := range fs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range writes {
				if _, err := fs[i].Write([]byte{byte(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			b := make([]byte, 1)
			for range writes {
				if _, err := fs[(i+1)%files].ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, f := range fs {
		if got := readAllAt(t, f); !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, writes)) {
			t.Fatalf("file %d: %d bytes, want %d of %d", i, len(got), writes, i)
		}
	}
}
