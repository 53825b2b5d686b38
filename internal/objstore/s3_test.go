package objstore_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/testproc"
)

func newS3(t *testing.T, o objstore.S3Options) *objstore.S3 {
	t.Helper()
	s, err := objstore.NewS3(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s objstore.Store, key string, off, n int64) (string, error) {
	t.Helper()
	r, err := s.Get(context.Background(), key, off, n)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// contract checks the Store interface's promises; Memory and S3 on a
// real S3 server must both keep them.
func contract(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put := func(key, v string) {
		t.Helper()
		if err := s.Put(ctx, key, strings.NewReader(v), int64(len(v))); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("t/0/a", "hello world")
	put("t/0/b", "second")
	put("t/1/a", "other")
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, -1, "hello world"}, {6, -1, "world"}, {0, 5, "hello"}, {6, 100, "world"}, {3, 0, ""}, {11, -1, ""}, {50, 4, ""}} {
		got, err := get(t, s, "t/0/a", c.off, c.n)
		if err != nil || got != c.want {
			t.Errorf("get(%d, %d) = %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	for _, n := range []int64{-1, 0, 5} {
		if _, err := get(t, s, "t/0/missing", 0, n); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("missing key (n=%d): %v, want ErrNotFound", n, err)
		}
	}
	if _, err := get(t, s, "t/0/missing", 50, 5); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("missing key past the end: %v, want ErrNotFound", err)
	}
	// A Put replaces the whole object.
	put("t/0/b", "2")
	if got, _ := get(t, s, "t/0/b", 0, -1); got != "2" {
		t.Errorf("overwritten: %q", got)
	}
	// A short body fails and leaves nothing.
	if err := s.Put(ctx, "t/0/short", strings.NewReader("abc"), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short body: %v", err)
	}
	if _, err := get(t, s, "t/0/short", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("short body left %v", err)
	}
	keys, err := s.List(ctx, "t/0/")
	if err != nil || strings.Join(keys, ",") != "t/0/a,t/0/b" {
		t.Errorf("list t/0/: %v %v", keys, err)
	}
	keys, _ = s.List(ctx, "")
	if strings.Join(keys, ",") != "t/0/a,t/0/b,t/1/a" {
		t.Errorf("list all: %v", keys)
	}
	if err := s.Delete(ctx, "t/0/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t/0/a"); err != nil {
		t.Errorf("delete of a missing key: %v", err)
	}
	if _, err := get(t, s, "t/0/a", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("deleted: %v", err)
	}
}

func TestMemoryContract(t *testing.T) { contract(t, &objstore.Memory{}) }

// TestS3Contract: the S3 store against a real S3 server keeps the
// interface's promises, with and without a key prefix (two prefixes on
// one bucket do not see each other's keys).
func TestS3Contract(t *testing.T) {
	srv := testproc.StartS3(t)
	o := srv.Options()
	t.Run("no prefix", func(t *testing.T) { contract(t, newS3(t, o)) })
	o.Prefix = "cluster-b"
	b := newS3(t, o)
	t.Run("prefix", func(t *testing.T) { contract(t, b) })
	// Both runs left t/0/b and t/1/a under their own prefix.
	keys, err := b.List(context.Background(), "")
	if err != nil || strings.Join(keys, ",") != "t/0/b,t/1/a" {
		t.Errorf("prefixed list: %v %v", keys, err)
	}
}

// TestS3PutBodies: a body that cannot seek is buffered (in memory, or in a
// temporary file past 8 MiB); one that can is sent from where it stands.
func TestS3PutBodies(t *testing.T) {
	srv := testproc.StartS3(t)
	s := newS3(t, srv.Options())
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16) // 9 MiB
	if err := s.Put(ctx, "big", io.MultiReader(bytes.NewReader(big)), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	got, err := get(t, s, "big", int64(len(big))-20, -1)
	if err != nil || got != string(big[len(big)-20:]) {
		t.Fatalf("big tail %q %v", got, err)
	}
	f, err := os.CreateTemp(t.TempDir(), "seg")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("headerSEGMENTtrailer")
	f.Seek(6, io.SeekStart)
	if err := s.Put(ctx, "file", f, 7); err != nil {
		t.Fatal(err)
	}
	if got, _ := get(t, s, "file", 0, -1); got != "SEGMENT" {
		t.Fatalf("file body: %q", got)
	}
}

// TestS3Check: the start-time check names what is wrong.
func TestS3Check(t *testing.T) {
	srv := testproc.StartS3(t)
	ctx := context.Background()
	if err := newS3(t, srv.Options()).Check(ctx); err != nil {
		t.Fatalf("good store: %v", err)
	}
	o := srv.Options()
	o.Bucket = "no-such-bucket"
	if err := newS3(t, o).Check(ctx); err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Errorf("missing bucket: %v", err)
	}
	o = srv.Options()
	o.AccessKeyID = "wrong"
	if err := newS3(t, o).Check(ctx); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("wrong credentials: %v", err)
	}
	// A put with refused credentials fails too (not retried forever).
	if err := newS3(t, o).Put(ctx, "k", strings.NewReader("v"), 1); err == nil {
		t.Errorf("put with wrong credentials succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	o = srv.Options()
	o.Endpoint, o.MaxAttempts = dead, 2
	if err := newS3(t, o).Check(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("closed port: %v", err)
	}
}

// TestS3Retries: 5xx answers are retried with backoff up to MaxAttempts.
func TestS3Retries(t *testing.T) {
	srv := testproc.StartS3(t)
	target, _ := url.Parse(srv.Endpoint)
	var failNext, seen atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if failNext.Add(-1) >= 0 {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	o := srv.Options()
	o.Endpoint, o.MaxAttempts, o.MaxBackoff = front.URL, 4, 20*time.Millisecond
	s := newS3(t, o)
	ctx := context.Background()
	failNext.Store(3)
	if err := s.Put(ctx, "k", strings.NewReader("value"), 5); err != nil {
		t.Fatalf("put after 3 failures with 4 attempts: %v", err)
	}
	if n := seen.Load(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	seen.Store(0)
	failNext.Store(4)
	if _, err := get(t, s, "k", 0, -1); err == nil {
		t.Errorf("get after 4 failures with 4 attempts succeeded")
	}
	if n := seen.Load(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	if got, err := get(t, s, "k", 0, -1); err != nil || got != "value" {
		t.Errorf("after the outage: %q %v", got, err)
	}
}

// TestS3Timeout: a server that accepts and never answers costs each
// attempt RequestTimeout, then the operation fails.
func TestS3Timeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	s := newS3(t, objstore.S3Options{Endpoint: "http://" + ln.Addr().String(), Bucket: "b", PathStyle: true,
		AccessKeyID: "k", SecretAccessKey: "s", RequestTimeout: 200 * time.Millisecond, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond})
	start := time.Now()
	_, err = s.List(context.Background(), "")
	d := time.Since(start)
	if err == nil {
		t.Fatal("list from a silent server succeeded")
	}
	if d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("failed after %v, want about 2 x 200ms", d)
	}
}

// TestFromConfig: the broker settings build the store, and tiered storage
// without a bucket or with an unreadable credentials file is refused.
func TestFromConfig(t *testing.T) {
	cfg := config.Defaults()
	if s, err := objstore.FromConfig(cfg); s != nil || err != nil {
		t.Fatalf("tiered storage off: %v %v", s, err)
	}
	cfg.Props["remote.log.storage.system.enable"] = "true"
	if _, err := objstore.FromConfig(cfg); err == nil || !strings.Contains(err.Error(), "sluice.remote.storage.bucket is required") {
		t.Fatalf("no bucket: %v", err)
	}
	srv := testproc.StartS3(t)
	for k, v := range srv.BrokerProps("") {
		cfg.Props[k] = v
	}
	s, err := objstore.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("store from the broker settings: %v", err)
	}
	cfg.Props["sluice.remote.storage.credentials.file"] = filepath.Join(t.TempDir(), "none")
	if _, err := objstore.FromConfig(cfg); err == nil || !strings.Contains(err.Error(), "credentials file") {
		t.Fatalf("missing credentials file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("[default]\nregion = x\n"), 0o600)
	cfg.Props["sluice.remote.storage.credentials.file"] = empty
	if _, err := objstore.FromConfig(cfg); err == nil || !strings.Contains(err.Error(), "no aws_access_key_id") {
		t.Fatalf("credentials file without keys: %v", err)
	}
	delete(cfg.Props, "sluice.remote.storage.credentials.file")
	cfg.Props["sluice.remote.storage.tls.ca.file"] = empty
	if _, err := objstore.FromConfig(cfg); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("CA file without a certificate: %v", err)
	}
}

// TestS3EnvironmentCredentials: without keys or a credentials file the
// store takes the standard AWS environment variables.
func TestS3EnvironmentCredentials(t *testing.T) {
	srv := testproc.StartS3(t)
	// Nothing else of the machine's: no shared files, no instance role.
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "")
	o := srv.Options()
	o.AccessKeyID, o.SecretAccessKey = "", ""
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	if err := newS3(t, o).Check(context.Background()); err != nil {
		t.Fatalf("credentials from the environment: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "someone-else")
	if err := newS3(t, o).Check(context.Background()); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("other credentials from the environment: %v", err)
	}
}

// TestS3TLS: an https endpoint signed by a private CA is trusted with
// CAFile, and refused without it.
func TestS3TLS(t *testing.T) {
	srv := testproc.StartS3(t)
	target, _ := url.Parse(srv.Endpoint)
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	defer front.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	o := srv.Options()
	o.Endpoint, o.MaxAttempts = front.URL, 1
	if err := newS3(t, o).Check(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("private CA without CAFile: %v", err)
	}
	o.CAFile = ca
	s := newS3(t, o)
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("private CA with CAFile: %v", err)
	}
	if err := s.Put(context.Background(), "k", strings.NewReader("over tls"), 8); err != nil {
		t.Fatal(err)
	}
	if got, err := get(t, s, "k", 5, -1); err != nil || got != "tls" {
		t.Fatalf("get over tls: %q %v", got, err)
	}
}
