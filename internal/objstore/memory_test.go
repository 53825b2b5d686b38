package objstore

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestMemory(t *testing.T) {
	ctx := context.Background()
	var m Memory
	if err := m.Put(ctx, "a/1", strings.NewReader("hello world"), 11); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "a/2", strings.NewReader("short"), 9); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v", err)
	}
	r, err := m.Get(ctx, "a/1", 6, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	if string(b) != "world" {
		t.Fatalf("range: %q", b)
	}
	if _, err := m.Get(ctx, "a/2", 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	keys, _ := m.List(ctx, "a/")
	if len(keys) != 1 || keys[0] != "a/1" {
		t.Fatalf("list: %v", keys)
	}
	if err := m.Delete(ctx, "a/1"); err != nil {
		t.Fatal(err)
	}
	if keys, _ := m.List(ctx, ""); len(keys) != 0 {
		t.Fatalf("after delete: %v", keys)
	}
}
