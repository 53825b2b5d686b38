package opsafety

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestRefusedKeysStopTheStart: a server.properties asking for what sluice
// does not implement and that would change where data lives, durability
// or membership (another remote storage manager, tiered storage without
// its bucket, several log directories, a ZooKeeper ensemble) stops `sluice serve` with exit status 1 and a message naming
// the key, before the data directory is touched.
func TestRefusedKeysStopTheStart(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	bin := testproc.Build(t)
	for i, c := range []struct{ line, want string }{
		{"remote.log.storage.manager.class.name=io.aiven.kafka.tieredstorage.RemoteStorageManager", "is refused: a custom RemoteStorageManager is not implemented"},
		{"remote.log.storage.system.enable=true", "sluice.remote.storage.bucket is required"},
		{"log.dirs=DIR/a,DIR/b", "is refused: sluice does not implement more than one log directory"},
		{"zookeeper.connect=localhost:2181", "zookeeper.connect=localhost:2181 is refused"},
	} {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		file := filepath.Join(dir, "server.properties")
		text := fmt.Sprintf("process.roles=broker,controller\nnode.id=1\nlisteners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d\nlog.dirs=%s\n%s\n",
			ports[0], ports[1], data, strings.ReplaceAll(c.line, "DIR", dir))
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bin, "serve", "--config", file).CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("case %d (%s): %v, want exit status 1 and %q:\n%s", i, c.line, err, c.want, tail(out))
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("case %d: the refused node created its data directory: %v", i, err)
		}
	}
}
