// Package opsafety holds real-process tests of operator mistakes that must
// never cost data: a data directory started as part of another cluster,
// partition directories the metadata does not know.
package opsafety

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// TestMemberStartedWithoutVoters is the mistake of a forgotten --voters: a
// member of a three-node cluster (RF 3 topic, 158 records on partition 1)
// is stopped and its data directory started alone. sluice must refuse
// (instead of starting a new single-node cluster on the directory, whose
// metadata would then treat the partitions as strays or replace them with
// a new topic's), name the directory's cluster id, the new one and
// --voters, and leave every byte of the directory as it was; the cluster,
// restarted, still serves the 158 records.
func TestMemberStartedWithoutVoters(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{"auto.create.topics.enable": "false"}})
	const topic = "orders"
	c.CreateTopic(topic, 3, 3, nil, nil)
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 158
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 1, Value: []byte("order-" + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cl.Close()
	for _, p := range c.Nodes() {
		p.Stop()
	}
	n2 := c.Node(2)
	props, found, err := metaprops.Read(n2.DataDir(), 2)
	if err != nil || !found || props.ClusterID == "" {
		t.Errorf("node 2's meta.properties: %+v found=%v err=%v: the cluster id is not recorded", props, found, err)
	}
	before := tree(t, n2.DataDir())

	// The forgotten flag: node 2's directory, no --voters.
	port, err := testproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, runCancel := context.WithTimeout(ctx, 20*time.Second)
	defer runCancel()
	cmd := exec.CommandContext(runCtx, testproc.Build(t), "serve", "--node-id", "2",
		"--listen", "127.0.0.1:"+strconv.Itoa(port[0]), "--data-dir", n2.DataDir())
	out, err := cmd.CombinedOutput()
	if runCtx.Err() != nil {
		t.Fatalf("the node started alone on a cluster member's directory and kept running (a new single-node cluster):\n%s", tail(out))
	}
	if err == nil {
		t.Fatalf("the start exited 0:\n%s", tail(out))
	}
	for _, want := range []string{props.ClusterID, "--voters", "new single-node cluster"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not name %q:\n%s", want, tail(out))
		}
	}
	if after := tree(t, n2.DataDir()); after != before {
		t.Fatalf("the refused start changed the data directory:\n%s\nwas\n%s", after, before)
	}

	// The cluster, restarted as it was, still has every record.
	for _, p := range c.Nodes() {
		p.Restart()
	}
	c.WaitBrokers(3, time.Minute)
	c.WaitTopicReady(topic, 3, time.Minute)
	got := c.ConsumeAll(topic, 3, time.Minute)
	if len(got) != n {
		t.Fatalf("read %d records back, want %d", len(got), n)
	}
	for i := range n {
		if a, ok := got["order-"+strconv.Itoa(i)]; !ok || a.Partition != 1 || a.Offset != int64(i) {
			t.Fatalf("order-%d: %+v (present %v), want partition 1 offset %d", i, a, ok, i)
		}
	}
}

// tree lists a directory's files with their sizes and content hashes (the
// process lock file aside: its content is the last owner's pid).
func tree(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Name() == ".lock" {
			return nil
		}
		if d.IsDir() {
			fmt.Fprintf(&sb, "%s/\n", rel)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		fmt.Fprintf(&sb, "%s %d %s\n", rel, len(b), hex.EncodeToString(h[:8]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// tail is the last lines of a process's output.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// TestStrayReplicaSetAside: a topic deleted while a replica's node was
// down leaves that replica's directory unknown to the metadata. When the
// node is back, the directory is renamed aside (gone-0.ID-stray) with
// every byte, never deleted, and the node serves on.
func TestStrayReplicaSetAside(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{"auto.create.topics.enable": "false"}})
	const topic = "gone"
	c.CreateTopic(topic, 1, 3, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cl.Close()
	n3 := c.Node(3)
	n3.Stop()
	seg := filepath.Join(n3.DataDir(), topic+"-0", "00000000000000000000.log")
	segData, err := os.ReadFile(seg)
	if err != nil || len(segData) == 0 {
		t.Fatalf("node 3's segment: %d bytes, %v", len(segData), err)
	}
	adm := c.Admin()
	if r, err := adm.DeleteTopics(ctx, topic); err != nil || r.Error() != nil {
		t.Fatalf("delete: %v %v", err, r.Error())
	}
	n3.Restart()
	testcluster.WaitFor(t, 30*time.Second, "node 3 sets the deleted topic's replica aside", func() (bool, string) {
		strays, _ := filepath.Glob(filepath.Join(n3.DataDir(), topic+"-0.*-stray"))
		return len(strays) == 1, fmt.Sprint(strays)
	})
	strays, _ := filepath.Glob(filepath.Join(n3.DataDir(), topic+"-0.*-stray"))
	got, err := os.ReadFile(filepath.Join(strays[0], filepath.Base(seg)))
	if err != nil || string(got) != string(segData) {
		t.Fatalf("the stray's segment: %d bytes (%v), want the %d bytes it had", len(got), err, len(segData))
	}
	if _, err := os.Stat(filepath.Dir(seg)); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", filepath.Dir(seg), err)
	}
	if !strings.Contains(n3.LogTail(200), "stray") {
		t.Error("node 3's log does not report the stray")
	}
	// The node's JSON view reports it; `sluice strays` lists it, and
	// removes it on request.
	resp, err := http.Get("http://" + n3.HTTPAddr() + "/api/v1/node")
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Strays []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
		} `json:"strays"`
	}
	err = json.NewDecoder(resp.Body).Decode(&view)
	resp.Body.Close()
	name := filepath.Base(strays[0])
	if err != nil || len(view.Strays) != 1 || view.Strays[0].Name != name || view.Strays[0].Bytes < int64(len(segData)) {
		t.Fatalf("/api/v1/node strays: %+v (%v), want %s", view.Strays, err, name)
	}
	out, err := exec.Command(testproc.Build(t), "strays", "--data-dir", n3.DataDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), name) {
		t.Fatalf("sluice strays: %v\n%s", err, out)
	}
	if out, err := exec.Command(testproc.Build(t), "strays", "--data-dir", n3.DataDir(), "--remove", topic+"-1").CombinedOutput(); err == nil {
		t.Fatalf("sluice strays --remove of a partition's name: %s", out)
	}
	if out, err := exec.Command(testproc.Build(t), "strays", "--data-dir", n3.DataDir(), "--remove", name).CombinedOutput(); err != nil {
		t.Fatalf("sluice strays --remove: %v\n%s", err, out)
	}
	if _, err := os.Stat(strays[0]); !os.IsNotExist(err) {
		t.Fatalf("the stray is still there after --remove: %v", err)
	}
}
