package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/metaprops"
)

// TestStorageFormatStandalone: format --standalone with a Kafka 4.x
// combined file records the cluster id and a quorum of this node on its
// advertised CONTROLLER listener; --initial-controllers records the
// voters and this node's directory id; bad arguments are refused.
func TestStorageFormatStandalone(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "server.properties")
	data := filepath.Join(dir, "data")
	os.WriteFile(cfg, []byte("process.roles=broker,controller\nnode.id=1\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n"+
		"advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\nlog.dirs="+data+"\n"), 0o644)
	id := metaprops.RandomUUID()
	if err := storageCmd([]string{"format", "--cluster-id", id, "--standalone", "--config", cfg}); err != nil {
		t.Fatal(err)
	}
	b, found, err := metaprops.ReadBootstrap(data)
	if err != nil || !found || b.ClusterID != id || b.Voters != "1@localhost:9093" {
		t.Fatalf("bootstrap %+v found %v err %v", b, found, err)
	}
	if err := storageCmd([]string{"format", "--cluster-id", id, "--standalone", "--config", cfg}); err == nil || !strings.Contains(err.Error(), "already formatted") {
		t.Fatalf("second format: %v", err)
	}
	if err := storageCmd([]string{"format", "--cluster-id", id, "--standalone", "--config", cfg, "--ignore-formatted"}); err != nil {
		t.Fatalf("--ignore-formatted: %v", err)
	}

	d2, d3 := metaprops.RandomUUID(), metaprops.RandomUUID()
	ic := "1@h1:9093:" + metaprops.RandomUUID() + ",2@h2:9093:" + d2 + ",3@h3:9093:" + d3
	data2 := filepath.Join(dir, "data2")
	if err := storageCmd([]string{"format", "--cluster-id", id, "--initial-controllers", ic, "--node-id", "2", "--data-dir", data2}); err != nil {
		t.Fatal(err)
	}
	p, _, err := metaprops.Read(data2, 2)
	b, _, err2 := metaprops.ReadBootstrap(data2)
	if err != nil || err2 != nil || p.DirectoryID != d2 || b.Voters != "1@h1:9093,2@h2:9093,3@h3:9093" {
		t.Fatalf("meta.properties %+v bootstrap %+v (%v, %v)", p, b, err, err2)
	}

	for _, args := range [][]string{
		{"format", "--standalone", "--config", cfg},
		{"format", "--cluster-id", "short", "--standalone", "--node-id", "1", "--data-dir", filepath.Join(dir, "x"), "--controller-listen", "h:1"},
		{"format", "--cluster-id", id, "--node-id", "1", "--data-dir", filepath.Join(dir, "y")},
		{"format", "--cluster-id", id, "--standalone", "--initial-controllers", ic, "--node-id", "1", "--data-dir", filepath.Join(dir, "z")},
		{"format", "--cluster-id", id, "--initial-controllers", "1@h1:9093", "--node-id", "1", "--data-dir", filepath.Join(dir, "w")},
		{"format", "--cluster-id", id, "--standalone", "--node-id", "1", "--data-dir", filepath.Join(dir, "v")},
	} {
		if err := storageCmd(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
