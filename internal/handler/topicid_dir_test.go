package handler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition directory carries its topic's id (partition.metadata,
// KIP-516). At a restart, a directory naming another id belongs to a
// deleted topic of the same name: its data is not served, and the
// directory is set aside (renamed re-0.ID-stray) with every byte, never
// deleted. One without the file (written before it existed) is adopted
// with its data.
func TestPartitionDirectoryTopicID(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tamper  func(t *testing.T, file string)
		wantEnd int64
		strays  int
	}{
		{"another topic's directory", func(t *testing.T, file string) {
			if err := os.WriteFile(file, []byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, 0, 1},
		{"a directory from before the file", func(t *testing.T, file string) {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		}, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := startNode(t, dir, nil)
			cl := n.client(kgo.DefaultProduceTopic("re"))
			if _, err := kadm.NewClient(cl).CreateTopic(ctx(t), 1, 1, nil, "re"); err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"a", "b", "c"} {
				if err := cl.ProduceSync(ctx(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			file := filepath.Join(dir, "re-0", "partition.metadata")
			data, err := os.ReadFile(file)
			if err != nil || !strings.HasPrefix(string(data), "version: 0\ntopic_id: ") {
				t.Fatalf("partition.metadata: %q, %v", data, err)
			}
			cl.Close()
			n.stop()
			tc.tamper(t, file)
			seg := filepath.Join("re-0", "00000000000000000000.log")
			segData, err := os.ReadFile(filepath.Join(dir, seg))
			if err != nil || len(segData) == 0 {
				t.Fatalf("segment: %d bytes, %v", len(segData), err)
			}

			n = startNode(t, dir, nil)
			offs, err := kadm.NewClient(n.client()).ListEndOffsets(context.Background(), "re")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := offs.Lookup("re", 0); o.Offset != tc.wantEnd {
				t.Fatalf("end offset after the restart: %d, want %d", o.Offset, tc.wantEnd)
			}
			if got, err := os.ReadFile(file); err != nil || string(got) != string(data) {
				t.Fatalf("partition.metadata after the restart: %q (%v), want %q", got, err, data)
			}
			strays, _ := filepath.Glob(filepath.Join(dir, "re-0.*-stray"))
			if len(strays) != tc.strays {
				t.Fatalf("stray directories %v, want %d", strays, tc.strays)
			}
			for _, s := range strays {
				got, err := os.ReadFile(filepath.Join(s, filepath.Base(seg)))
				if err != nil || string(got) != string(segData) {
					t.Fatalf("the stray's segment: %d bytes (%v), want the %d bytes it had", len(got), err, len(segData))
				}
			}
		})
	}
}
