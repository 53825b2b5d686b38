package metaprops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	p, err := Ensure(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.NodeID != 3 || p.Format != CurrentFormat || len(p.DirectoryID) != 22 {
		t.Fatalf("new directory: %+v", p)
	}
	// The next start reads the same file back.
	q, err := Ensure(dir, 3)
	if err != nil || q != p {
		t.Fatalf("second start: %+v %v, want %+v", q, err, p)
	}
	// Another node's id is refused.
	if _, err := Ensure(dir, 4); err == nil || !strings.Contains(err.Error(), "belongs to node 3") {
		t.Fatalf("node 4 on node 3's directory: %v", err)
	}
	// A newer format is refused, and the file is left as it was.
	newer := strings.Replace(p.String(), "sluice.data.format=1", "sluice.data.format=7", 1)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, 3); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "data format 7") {
		t.Fatalf("newer format: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); string(b) != newer {
		t.Fatal("the refused file was rewritten")
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		text string
		want Props
		err  string
	}{
		{"version=1\nnode.id=2\ndirectory.id=abc\n", Props{NodeID: 2, DirectoryID: "abc", Format: 1}, ""},
		{"#c\nversion=1\nnode.id=2\nsluice.data.format=1\ncluster.id=x\n", Props{NodeID: 2, Format: 1}, ""},
		{"version=0\nbroker.id=5\n", Props{NodeID: 5, Format: 1}, ""},
		{"version=2\nnode.id=2\n", Props{}, "only versions 0 and 1"},
		{"version=1\nnode.id=x\n", Props{}, "node.id"},
		{"version=1\nnode.id=1\nsluice.data.format=0\n", Props{}, "positive integer"},
		{"version=1\ngarbage\n", Props{}, "not key=value"},
	} {
		got, err := Parse(c.text)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error with %q", c.text, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.text, got, err, c.want)
		}
	}
}
