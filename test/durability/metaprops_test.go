package durability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestDataDirIdentityAndFormat: the first start writes meta.properties
// (node id, directory id, data format); a start with another --node-id,
// or on a directory whose format is newer than the binary's, exits
// non-zero at once with a message naming the problem, and leaves the
// directory as it was; the right node starts again.
func TestDataDirIdentityAndFormat(t *testing.T) {
	p := testproc.Start(t, testproc.Options{NodeID: 3})
	p.Stop()
	meta := filepath.Join(p.DataDir(), "meta.properties")
	b, err := os.ReadFile(meta)
	if err != nil || !bytes.Contains(b, []byte("node.id=3\n")) || !bytes.Contains(b, []byte("sluice.data.format=1\n")) {
		t.Fatalf("meta.properties after the first start: %v\n%s", err, b)
	}
	serve := func(nodeID int) (string, error) {
		ports, err := testproc.FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, testproc.Build(t), "serve", "--node-id", fmt.Sprint(nodeID), "--data-dir", p.DataDir(),
			"--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--http", fmt.Sprintf("127.0.0.1:%d", ports[1]))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		return stderr.String(), err
	}
	if out, err := serve(4); err == nil || !strings.Contains(out, "belongs to node 3, and this is node 4") {
		t.Fatalf("node 4 on node 3's directory: %v\n%s", err, out)
	}
	newer := bytes.Replace(b, []byte("sluice.data.format=1"), []byte("sluice.data.format=2"), 1)
	if err := os.WriteFile(meta, newer, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := serve(3); err == nil || !strings.Contains(out, "written by a newer sluice (data format 2; this binary reads formats up to 1)") {
		t.Fatalf("a newer data format: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(meta); !bytes.Equal(got, newer) {
		t.Fatal("a refused start rewrote meta.properties")
	}
	if err := os.WriteFile(meta, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.Restart() // node 3, its own format: serves again
}
