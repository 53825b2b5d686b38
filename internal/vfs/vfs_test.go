package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func readAll(t *testing.T, f File) []byte {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && int64(n) == size) {
		t.Fatal(err)
	}
	return b
}

// testFS runs the same behavioural checks against any FS.
func testFS(t *testing.T, fsys FS, root string) {
	dir := filepath.Join(root, "a", "b")
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "f")
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got) != "hello world" {
		t.Fatalf("got %q", got)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("!")); err != nil { // appends at the new end
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got) != "Jello!" {
		t.Fatalf("got %q", got)
	}
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 3); n != 3 || err != io.EOF {
		t.Fatalf("short ReadAt: %d %v", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// OpenReadWrite keeps contents and appends.
	f, err = fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("?"))
	if got := readAll(t, f); string(got) != "Jello!?" {
		t.Fatalf("got %q", got)
	}
	f.Close()
	// Read-only files refuse writes.
	ro, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Write([]byte("x")); err == nil {
		t.Fatal("write to read-only file succeeded")
	}
	ro.Close()
	if _, err := fsys.Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	if err := fsys.Rename(name, filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	fsys.Create(filepath.Join(dir, "e"))
	names, err := fsys.List(dir)
	if err != nil || !reflect.DeepEqual(names, []string{"e", "g"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	if ok, _ := Exists(fsys, name); ok {
		t.Fatal("renamed file still exists")
	}
	st, err := fsys.Stat(filepath.Join(dir, "g"))
	if err != nil || st.Size() != 7 || st.IsDir() {
		t.Fatalf("Stat = %v, %v", st, err)
	}
	if err := WriteFileAtomic(fsys, filepath.Join(dir, "cp"), []byte("v1"), true); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(fsys, filepath.Join(dir, "cp"), 10); err != nil || string(b) != "v1" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile(fsys, filepath.Join(dir, "cp"), 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile limit: %v", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(filepath.Join(dir, "e")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(dir); err == nil {
		t.Fatal("removed non-empty directory")
	}
	if err := fsys.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := Exists(fsys, dir); ok {
		t.Fatal("RemoveAll left the directory")
	}
}

func TestOS(t *testing.T) {
	testFS(t, Default, t.TempDir())
	f, err := Default.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(OSFiler); !ok {
		t.Fatal("OS file does not expose OSFile")
	}
}

func TestMem(t *testing.T) { testFS(t, NewMem(), "/data") }

func TestMemCrashKeepsSynced(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		m := NewMem()
		m.MkdirAll("d", 0o755)
		m.SyncDir("")
		f, _ := m.Create("d/f")
		m.SyncDir("d")
		f.Write([]byte("durable"))
		f.Sync()
		f.Write([]byte("-maybe-"))
		f.Write([]byte("-more"))
		c := m.Crash(rand.New(rand.NewSource(seed)))
		g, err := c.Open("d/f")
		if err != nil {
			t.Fatalf("seed %d: synced file lost: %v", seed, err)
		}
		got := readAll(t, g)
		full := []byte("durable-maybe--more")
		if !bytes.HasPrefix(got, []byte("durable")) || len(got) > len(full) {
			t.Fatalf("seed %d: got %q", seed, got)
		}
		// The kept suffix is a prefix of what was written, possibly followed
		// by zeros where size persisted before data.
		trim := bytes.TrimRight(got, "\x00")
		if !bytes.HasPrefix(full, trim) {
			t.Fatalf("seed %d: got %q, not a prefix of %q", seed, got, full)
		}
		// The original is untouched and still writable.
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemCrashOutcomes(t *testing.T) {
	// Across seeds, an unsynced create must sometimes survive and sometimes
	// not; an unsynced tail must sometimes be cut; a synced create always
	// survives.
	var lost, kept, torn, whole int
	for seed := int64(0); seed < 300; seed++ {
		m := NewMem()
		a, _ := m.Create("a")
		a.Write([]byte("aaaa"))
		a.Sync()
		m.SyncDir("")
		b, _ := m.Create("b") // never dir-synced
		b.Write([]byte("bbbb"))
		b.Sync()
		a.Write(bytes.Repeat([]byte("x"), 100))
		c := m.Crash(rand.New(rand.NewSource(seed)))
		if ok, _ := Exists(c, "a"); !ok {
			t.Fatal("dir-synced file lost")
		}
		if ok, _ := Exists(c, "b"); ok {
			kept++
		} else {
			lost++
		}
		fa, _ := c.Open("a")
		if n := len(readAll(t, fa)); n == 104 {
			whole++
		} else if n < 104 {
			torn++
		}
	}
	if lost == 0 || kept == 0 || torn == 0 || whole == 0 {
		t.Fatalf("crash model not exercising outcomes: lost=%d kept=%d torn=%d whole=%d", lost, kept, torn, whole)
	}
}

func TestMemCrashRenameAtomic(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		m := NewMem()
		if err := WriteFileAtomic(m, "cp", []byte("old"), true); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(m, "cp", []byte("new"), false); err != nil {
			t.Fatal(err)
		}
		c := m.Crash(rand.New(rand.NewSource(seed)))
		b, err := ReadFile(c, "cp", 100)
		if err != nil {
			t.Fatalf("seed %d: checkpoint lost: %v", seed, err)
		}
		// Without sync the new name may point at a torn file, but the name
		// never disappears and old contents are never mixed in.
		if s := string(b); s != "old" && !bytes.HasPrefix([]byte("new"), bytes.TrimRight(b, "\x00")) {
			t.Fatalf("seed %d: got %q", seed, s)
		}
		// With sync, the new contents are guaranteed.
		if err := WriteFileAtomic(m, "cp", []byte("v3"), true); err != nil {
			t.Fatal(err)
		}
		c = m.Crash(rand.New(rand.NewSource(seed)))
		if b, _ := ReadFile(c, "cp", 100); string(b) != "v3" {
			t.Fatalf("seed %d: synced checkpoint = %q", seed, b)
		}
	}
}

func TestMemCrashTruncateThenWrite(t *testing.T) {
	// A truncation followed by writes, all unsynced: the result must be one
	// of the states the sequence passed through (possibly torn), never a mix
	// of old bytes after new ones.
	for seed := int64(0); seed < 300; seed++ {
		m := NewMem()
		f, _ := m.Create("f")
		m.SyncDir("")
		f.Write([]byte("0123456789"))
		f.Sync()
		f.Truncate(4)
		f.Write([]byte("abcdef"))
		c := m.Crash(rand.New(rand.NewSource(seed)))
		g, _ := c.Open("f")
		got := string(readAll(t, g))
		valid := got == "0123456789" || got == "0123" ||
			(len(got) >= 4 && got[:4] == "0123" && bytes.HasPrefix([]byte("abcdef"), bytes.TrimRight([]byte(got[4:]), "\x00")))
		if !valid {
			t.Fatalf("seed %d: got %q", seed, got)
		}
	}
}

func TestMemCrashDeterministic(t *testing.T) {
	build := func() *Mem {
		m := NewMem()
		for i := 0; i < 5; i++ {
			f, _ := m.Create(string(rune('a' + i)))
			f.Write(bytes.Repeat([]byte{byte(i)}, 50))
		}
		return m
	}
	snap := func(m *Mem) map[string]string {
		out := map[string]string{}
		names, _ := m.List("")
		for _, n := range names {
			b, _ := ReadFile(m, n, 1000)
			out[n] = string(b)
		}
		return out
	}
	a := snap(build().Crash(rand.New(rand.NewSource(7))))
	b := snap(build().Crash(rand.New(rand.NewSource(7))))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Crash is not deterministic for a seed")
	}
}

func TestFaults(t *testing.T) {
	rule := &Rule{Ops: []Op{OpSync}, PathContains: ".log", Count: 1}
	fsys := WithFaults(NewMem(), rule)
	f, err := fsys.Create("x.log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Sync = %v, want injected", err)
	}
	if err := f.Sync(); err != nil { // Count exhausted
		t.Fatalf("second Sync = %v", err)
	}
	if rule.Fired() != 1 {
		t.Fatalf("Fired = %d", rule.Fired())
	}
	g, _ := fsys.Create("x.index")
	if err := g.Sync(); err != nil {
		t.Fatalf("non-matching path failed: %v", err)
	}
	slow := &Rule{Ops: []Op{OpWrite}, Delay: 5 * time.Millisecond}
	fsys = WithFaults(NewMem(), slow)
	f, _ = fsys.Create("y")
	start := time.Now()
	if _, err := f.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 5*time.Millisecond {
		t.Fatal("delay rule did not delay")
	}
	slow.Disable()
	if _, ok := f.(OSFiler); ok {
		t.Fatal("fault file exposes OSFile")
	}
}
