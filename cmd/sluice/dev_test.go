package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/objstore"
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
		text, err := devProperties(c.n, "", "")
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
	text, err := devProperties(3, user, "")
	if err != nil {
		t.Fatal(err)
	}
	b := load(text)
	if b.Int("min.insync.replicas", 0) != 1 || b.Int("num.partitions", 0) != 6 || b.Int("default.replication.factor", 0) != 3 {
		t.Errorf("with %s: %v", user, b.Props)
	}
	os.WriteFile(user, []byte("num.partitions=six\n"), 0o644)
	if _, err := devProperties(3, user, ""); err == nil || !strings.Contains(err.Error(), user) || !strings.Contains(err.Error(), "num.partitions") {
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

// TestDevS3Server: dev's S3 server takes objects and keeps them in its
// data directory across a restart; the settings it gives the brokers
// turn tiered storage on with it (a --config file still wins), and reach
// it through objstore.FromConfig as a broker does.
func TestDevS3Server(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s3, err := startDevS3(dir, port)
	if err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(t.TempDir(), "user.properties")
	os.WriteFile(user, []byte("sluice.remote.storage.prefix=mine\n"), 0o644)
	text, err := devProperties(1, user, s3.properties())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dev.properties")
	os.WriteFile(p, []byte(text), 0o644)
	cfg := config.Defaults()
	if err := cfg.LoadFile(p); err != nil {
		t.Fatal(err)
	}
	if !cfg.Bool("remote.log.storage.system.enable", false) || cfg.Props["sluice.remote.storage.prefix"] != "mine" {
		t.Fatalf("dev properties with --s3: %v", cfg.Props)
	}
	open := func() *objstore.S3 {
		t.Helper()
		st, err := objstore.FromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Check(ctx); err != nil {
			t.Fatalf("the bucket: %v", err)
		}
		return st
	}
	ctx := context.Background()
	st := open()
	if err := st.Put(ctx, "a/b.log", strings.NewReader("hello tiered"), 12); err != nil {
		t.Fatal(err)
	}
	s3.close()
	if s3, err = startDevS3(dir, port); err != nil {
		t.Fatal(err)
	}
	defer s3.close()
	st = open()
	rc, err := st.Get(ctx, "a/b.log", 6, 6)
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "tiered" {
		t.Fatalf("after a restart: %q", b)
	}
}
