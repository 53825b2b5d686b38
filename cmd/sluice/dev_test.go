package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/config"
)

// TestDevProperties: dev's defaults are sized to the cluster, a --config
// file's keys win over them, and a bad --config is an error naming it.
func TestDevProperties(t *testing.T) {
	load := func(text string) *config.Broker {
		t.Helper()
		p := filepath.Join(t.TempDir(), "dev.properties")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		b := config.Defaults()
		if err := b.LoadFile(p); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct{ n, rf, isr int }{{1, 1, 1}, {2, 2, 2}, {3, 3, 2}, {5, 3, 2}} {
		text, err := devProperties(c.n, "")
		if err != nil {
			t.Fatal(err)
		}
		b := load(text)
		if b.Int("default.replication.factor", 0) != int64(c.rf) || b.Int("min.insync.replicas", 0) != int64(c.isr) || b.Int("offsets.topic.replication.factor", 0) != int64(c.rf) {
			t.Errorf("%d brokers: %v", c.n, b.Props)
		}
	}
	user := filepath.Join(t.TempDir(), "user.properties")
	os.WriteFile(user, []byte("min.insync.replicas=1\nnum.partitions=6\n"), 0o644)
	text, err := devProperties(3, user)
	if err != nil {
		t.Fatal(err)
	}
	b := load(text)
	if b.Int("min.insync.replicas", 0) != 1 || b.Int("num.partitions", 0) != 6 || b.Int("default.replication.factor", 0) != 3 {
		t.Errorf("with %s: %v", user, b.Props)
	}
	os.WriteFile(user, []byte("num.partitions=six\n"), 0o644)
	if _, err := devProperties(3, user); err == nil || !strings.Contains(err.Error(), user) || !strings.Contains(err.Error(), "num.partitions") {
		t.Errorf("bad --config: %v", err)
	}
}

// TestBuildVersion: -ldflags' version wins; otherwise the build info gives
// a non-empty one.
func TestBuildVersion(t *testing.T) {
	old := version
	defer func() { version = old }()
	version = "v1.2.3"
	if got := buildVersion(); got != "v1.2.3" {
		t.Errorf("with -X main.version: %q", got)
	}
	version = ""
	if got := buildVersion(); got == "" || got == "dev" {
		t.Errorf("from build info: %q", got)
	}
}
