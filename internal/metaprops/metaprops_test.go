package metaprops

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenNewDirectory(t *testing.T) {
	dir := t.TempDir()
	id, err := Open(dir, 3, Start{NewClusterID: "new"})
	if err != nil {
		t.Fatal(err)
	}
	p := id.Props()
	if p.NodeID != 3 || p.Format != CurrentFormat || len(p.DirectoryID) != 22 || p.ClusterID != "" {
		t.Fatalf("new directory: %+v", p)
	}
	// The cluster id is recorded once the node acts on its metadata.
	if err := id.Join("c1"); err != nil {
		t.Fatal(err)
	}
	// The next start reads the same file back.
	q, found, err := Read(dir, 3)
	if want := (Props{ClusterID: "c1", NodeID: 3, DirectoryID: p.DirectoryID, Format: CurrentFormat}); err != nil || !found || q != want {
		t.Fatalf("second start: %+v %v %v, want %+v", q, found, err, want)
	}
	// Another node's id is refused.
	if _, _, err := Read(dir, 4); err == nil || !strings.Contains(err.Error(), "belongs to node 3") {
		t.Fatalf("node 4 on node 3's directory: %v", err)
	}
	// A newer format is refused, and the file is left as it was.
	newer := strings.Replace(q.String(), "sluice.data.format=1", "sluice.data.format=7", 1)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, 3, Start{Quorum: true}); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "data format 7") {
		t.Fatalf("newer format: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); string(b) != newer {
		t.Fatal("the refused file was rewritten")
	}
}

// TestJoinAnotherCluster: a directory that recorded its cluster refuses
// metadata of another, and keeps its file.
func TestJoinAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	id, err := Open(dir, 1, Start{Quorum: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Join("c1"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, FileName))
	err = id.Join("c2")
	if err == nil || !strings.Contains(err.Error(), "c1") || !strings.Contains(err.Error(), "c2") || !strings.Contains(err.Error(), "--voters") {
		t.Fatalf("join c2: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, FileName)); string(after) != string(before) {
		t.Fatal("a refused join changed meta.properties")
	}
	if err := id.Join("c1"); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefuses walks the starts that would put a directory in another
// cluster: each is refused, names what it must, and changes nothing.
func TestOpenRefuses(t *testing.T) {
	props := func(cluster string) string {
		p := Props{ClusterID: cluster, NodeID: 2, DirectoryID: "d", Format: 1}
		return p.String()
	}
	for _, c := range []struct {
		name  string
		props string            // meta.properties, "" for none
		dirs  []string          // directories to create
		local string            // single-node metadata's cluster id, "" for none
		start Start             //
		want  []string          // in the error; nil for an accepted start
		files map[string]string // extra files
	}{
		// A metadata log without --voters is left to the controller,
		// which refuses it unless its quorum is this node alone
		// (controller.ErrNotStandalone).
		{name: "member without --voters", props: props("C"), dirs: []string{"__raft", "orders-1"},
			start: Start{NewClusterID: "N"}},
		{name: "broker-only member without --voters", props: props("C"), dirs: []string{"orders-0"},
			start: Start{NewClusterID: "N"}, want: []string{"cluster C", "cluster N", "--voters"}},
		{name: "member from before cluster.id, without --voters", props: props(""), dirs: []string{"__raft", "orders-1"},
			start: Start{NewClusterID: "N"}},
		{name: "broker-only member from before cluster.id, without --voters", props: props(""), dirs: []string{"orders-1"},
			start: Start{NewClusterID: "N"}, want: []string{"new single-node cluster N", "--voters", "1 partition directories"}},
		{name: "member with no meta.properties, without --voters", dirs: []string{"__consumer_offsets-7"},
			start: Start{NewClusterID: "N"}, want: []string{"cluster N", "--voters"}},
		{name: "single-node with --voters", props: props("S"), local: "S", dirs: []string{"orders-0"},
			start: Start{Quorum: true}, want: []string{"single-node cluster S", "without --voters"}},
		{name: "mixed directory", props: props("C"), local: "S",
			start: Start{NewClusterID: "N"}, want: []string{"cluster C", "cluster S"}},
		{name: "single-node restart", props: props("S"), local: "S", dirs: []string{"orders-0"}, start: Start{NewClusterID: "N"}},
		{name: "single-node from before cluster.id", props: props(""), local: "S", dirs: []string{"orders-0"}, start: Start{NewClusterID: "N"}},
		{name: "member restart", props: props("C"), dirs: []string{"__raft", "orders-0"}, start: Start{Quorum: true}},
		{name: "new member", start: Start{Quorum: true}},
		{name: "new single node", start: Start{NewClusterID: "N"}},
		{name: "strays and files only", props: props(""), dirs: []string{"orders-0.abc-stray"},
			files: map[string]string{"recovery-point-offset-checkpoint": "0\n0\n"}, start: Start{NewClusterID: "N"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.props != "" {
				os.WriteFile(filepath.Join(dir, FileName), []byte(c.props), 0o644)
			}
			for _, d := range c.dirs {
				os.MkdirAll(filepath.Join(dir, d), 0o755)
			}
			for f, text := range c.files {
				os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644)
			}
			if c.local != "" {
				os.MkdirAll(filepath.Join(dir, LocalMetadataDir), 0o755)
				os.WriteFile(filepath.Join(dir, LocalMetadataDir, "metadata.json"), []byte(`{"clusterId":"`+c.local+`"}`), 0o644)
			}
			before := snapshot(t, dir)
			_, err := Open(dir, 2, c.start)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if after := snapshot(t, dir); after != before {
				t.Fatalf("a refused start changed the directory:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// snapshot lists dir's tree with its files' contents.
func snapshot(t *testing.T, dir string) string {
	var sb strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		sb.WriteString(p)
		if !info.IsDir() {
			b, _ := os.ReadFile(p)
			sb.WriteString("=" + string(b))
		}
		sb.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func TestIsPartitionDir(t *testing.T) {
	for name, want := range map[string]bool{
		"orders-0": true, "a-b-12": true, "__consumer_offsets-49": true,
		"__raft": false, "__cluster_metadata": false, "orders-0.k2j-stray": false, "orders-": false,
		"-1": false, "orders-x": false, "cleaner-offset-checkpoint": false, "t-123456789012": false,
	} {
		if got := IsPartitionDir(name); got != want {
			t.Errorf("IsPartitionDir(%q) = %v", name, got)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		text string
		want Props
		err  string
	}{
		{"version=1\nnode.id=2\ndirectory.id=abc\n", Props{NodeID: 2, DirectoryID: "abc", Format: 1}, ""},
		{"#c\nversion=1\nnode.id=2\nsluice.data.format=1\ncluster.id=x\n", Props{ClusterID: "x", NodeID: 2, Format: 1}, ""},
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

// TestFormat: Format writes meta.properties with the cluster and
// directory ids and the bootstrap quorum ReadBootstrap reads back; a
// second Format is refused and changes nothing; a bad cluster id is
// refused before anything is written.
func TestFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	id, dirID := RandomUUID(), RandomUUID()
	if err := Format(dir, 3, "", Bootstrap{ClusterID: "not-a-uuid", Voters: "3@h:1"}); err == nil {
		t.Fatal("a bad cluster id was accepted")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused format wrote %s: %v", dir, err)
	}
	if err := Format(dir, 3, dirID, Bootstrap{ClusterID: id, Voters: "1@h:1,3@h:3"}); err != nil {
		t.Fatal(err)
	}
	p, found, err := Read(dir, 3)
	if err != nil || !found || p.ClusterID != id || p.DirectoryID != dirID || p.NodeID != 3 {
		t.Fatalf("meta.properties %+v found %v err %v", p, found, err)
	}
	b, found, err := ReadBootstrap(dir)
	if err != nil || !found || b.ClusterID != id || b.Voters != "1@h:1,3@h:3" {
		t.Fatalf("bootstrap %+v found %v err %v", b, found, err)
	}
	before := snapshot(t, dir)
	if err := Format(dir, 3, "", Bootstrap{ClusterID: RandomUUID(), Voters: "3@h:3"}); !errors.Is(err, ErrFormatted) {
		t.Fatalf("second format: %v, want ErrFormatted", err)
	}
	if after := snapshot(t, dir); after != before {
		t.Fatalf("the refused format changed the directory:\n%s\nwas\n%s", after, before)
	}
	if _, found, err := ReadBootstrap(t.TempDir()); found || err != nil {
		t.Fatalf("an unformatted directory: found %v err %v", found, err)
	}
}
