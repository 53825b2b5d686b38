package node

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/testproc"
)

// syncBuffer is a log sink safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits up to 20 s for a log line containing each of want.
func waitLog(t *testing.T, logs *syncBuffer, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, line := range strings.Split(logs.String(), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
	}
	t.Fatalf("no log line with %q:\n%s", want, logs.String())
}

// TestRemoteStoreAtStart: with remote.log.storage.system.enable=true the
// node builds the object store from sluice.remote.storage.* and checks it
// against a real S3 server; a missing bucket or refused credentials are
// an alarm in the log and the node still serves; a missing bucket
// setting stops the start before the data directory is made.
func TestRemoteStoreAtStart(t *testing.T) {
	srv := testproc.StartS3(t)
	start := func(t *testing.T, props map[string]string) (*Node, *syncBuffer, *config.Broker) {
		t.Helper()
		cfg := config.Defaults()
		cfg.DataDir = t.TempDir()
		cfg.Listen = freeAddr(t)
		for k, v := range props {
			cfg.Props[k] = v
		}
		logs := &syncBuffer{}
		n, err := Start(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n, logs, cfg
	}
	produce := func(t *testing.T, addr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal("produce:", err)
		}
	}
	t.Run("reachable", func(t *testing.T) {
		n, logs, cfg := start(t, srv.BrokerProps(""))
		waitLog(t, logs, "remote storage reachable", "s3://"+srv.Bucket+"/ at "+srv.Endpoint)
		if n.Broker() == nil {
			t.Fatal("no broker")
		}
		produce(t, cfg.Listen)
	})
	t.Run("missing bucket", func(t *testing.T) {
		props := srv.BrokerProps("")
		props["sluice.remote.storage.bucket"] = "no-such-bucket"
		_, logs, cfg := start(t, props)
		waitLog(t, logs, "level=ERROR", "remote storage unavailable", `bucket \"no-such-bucket\" does not exist`)
		produce(t, cfg.Listen)
	})
	t.Run("refused credentials", func(t *testing.T) {
		creds := filepath.Join(t.TempDir(), "creds")
		os.WriteFile(creds, []byte("[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n"), 0o600)
		props := srv.BrokerProps("")
		props["sluice.remote.storage.credentials.file"] = creds
		_, logs, cfg := start(t, props)
		waitLog(t, logs, "level=ERROR", "remote storage unavailable", "refused the credentials")
		produce(t, cfg.Listen)
	})
	t.Run("no bucket setting", func(t *testing.T) {
		cfg := config.Defaults()
		cfg.DataDir = filepath.Join(t.TempDir(), "data")
		cfg.Listen = freeAddr(t)
		cfg.Props["remote.log.storage.system.enable"] = "true"
		_, err := Start(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "sluice.remote.storage.bucket is required") {
			t.Fatalf("start without a bucket: %v", err)
		}
		if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
			t.Fatalf("the refused start made its data directory: %v", err)
		}
	})
}
