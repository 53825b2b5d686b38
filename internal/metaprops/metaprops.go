// Package metaprops reads and writes a data directory's meta.properties,
// as Kafka's MetaProperties / MetaPropertiesEnsemble do: which node the
// directory belongs to and which on-disk format wrote it, checked at every
// start before anything else reads the directory, so that a binary never
// opens data of another node or of a newer format it does not know.
//
// The file is Kafka's version 1 form plus one sluice key:
//
//	version=1
//	cluster.id=<the cluster's id, 22 characters>
//	node.id=3
//	directory.id=<random, base64 URL-safe, 22 characters>
//	sluice.data.format=1
//
// cluster.id is written once the node knows its cluster (at once for a
// single-node cluster, when the metadata first names it in a quorum); from
// then on a start that would put the directory in another cluster is
// refused (identity.go), as Kafka refuses one with
// InconsistentClusterIdException.
//
// sluice.data.format is the version of everything sluice writes in the
// directory (segments, indexes, checkpoints, producer snapshots, the
// metadata log, ...) taken together: a release that changes one of them
// in a way an older binary cannot read raises it, and an older binary then
// refuses the directory with a message instead of misreading it. A
// directory written before the file existed (format 1) gets one at its
// next start.
package metaprops

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/vfs"
)

// FileName is the file's name in the data directory.
const FileName = "meta.properties"

// CurrentFormat is the data format this binary writes and the newest it
// reads.
const CurrentFormat = 1

// maxBytes bounds the file.
const maxBytes = 64 << 10

// Props are a directory's meta.properties.
type Props struct {
	// ClusterID is the cluster the directory belongs to, "" while not
	// known yet (a new node of a quorum, or a directory written before
	// the key existed).
	ClusterID   string
	NodeID      int32
	DirectoryID string
	Format      int
}

// ErrNewerFormat is wrapped by Ensure's error for a directory written by
// a newer format.
var ErrNewerFormat = errors.New("data directory written by a newer sluice")

// Read reads dir's meta.properties and checks it against node id and this
// binary's format. It writes nothing; found is false when the directory
// has no file (a new directory, or one written before the file existed).
func Read(dir string, nodeID int32) (p Props, found bool, err error) {
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Props{}, false, nil
	}
	if err != nil {
		return Props{}, false, err
	}
	if len(b) > maxBytes {
		return Props{}, false, fmt.Errorf("%s: %d bytes, more than a meta.properties holds", path, len(b))
	}
	if p, err = Parse(string(b)); err != nil {
		return Props{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if p.NodeID != nodeID {
		return Props{}, false, fmt.Errorf("%s: the data directory belongs to node %d, and this is node %d: start it with --node-id %d, or give this node its own --data-dir", path, p.NodeID, nodeID, p.NodeID)
	}
	if p.Format > CurrentFormat {
		return Props{}, false, fmt.Errorf("%s: %w (data format %d; this binary reads formats up to %d): run the newer binary again, or restore the directory from before it ran", path, ErrNewerFormat, p.Format, CurrentFormat)
	}
	return p, true, nil
}

// newProps are a new directory's: a random directory id, this format.
func newProps(nodeID int32) (Props, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Props{}, err
	}
	return Props{NodeID: nodeID, DirectoryID: base64.RawURLEncoding.EncodeToString(id[:]), Format: CurrentFormat}, nil
}

// Parse reads the file's text.
func Parse(text string) (Props, error) {
	kv := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Props{}, fmt.Errorf("line %q is not key=value", line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if v := kv["version"]; v != "1" && v != "0" {
		return Props{}, fmt.Errorf("version=%q: only versions 0 and 1 of meta.properties are known", v)
	}
	id, err := strconv.ParseInt(kv["node.id"], 10, 32)
	if err != nil {
		if bid, err2 := strconv.ParseInt(kv["broker.id"], 10, 32); err2 == nil { // version 0 (ZooKeeper mode)
			id, err = bid, nil
		}
	}
	if err != nil {
		return Props{}, fmt.Errorf("node.id=%q: %v", kv["node.id"], err)
	}
	p := Props{ClusterID: kv["cluster.id"], NodeID: int32(id), DirectoryID: kv["directory.id"], Format: 1}
	if f, ok := kv["sluice.data.format"]; ok {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return Props{}, fmt.Errorf("sluice.data.format=%q: want a positive integer", f)
		}
		p.Format = n
	}
	return p, nil
}

// String is the file's text.
func (p Props) String() string {
	kv := map[string]string{
		"version":            "1",
		"node.id":            strconv.Itoa(int(p.NodeID)),
		"directory.id":       p.DirectoryID,
		"sluice.data.format": strconv.Itoa(p.Format),
	}
	if p.ClusterID != "" {
		kv["cluster.id"] = p.ClusterID
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString("# sluice data directory (Kafka's meta.properties); written at the first start\n")
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, kv[k])
	}
	return sb.String()
}

// write stores p durably: vfs.WriteFileAtomic with syncs (a temporary
// file synced, renamed, the directory synced).
func write(dir string, p Props) error {
	return vfs.WriteFileAtomic(vfs.Default, filepath.Join(dir, FileName), []byte(p.String()), true)
}
