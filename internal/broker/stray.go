package broker

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/vfs"
)

// A stray replica is a partition directory the metadata does not assign
// to this node with that topic id: a topic deleted (or a replica moved
// away) while the node was down, or a topic of the same name as one this
// directory held. Kafka (3.7 on) renames such a log directory with the
// -stray suffix instead of deleting it (UnifiedLog.StrayDirSuffix); so
// does sluice, and nothing here ever deletes one: if the metadata is not
// the cluster the data belongs to, the bytes are still there to recover.

// StraySuffix ends a stray partition directory's name: topic-N.ID-stray.
const StraySuffix = "-stray"

// IsStrayDir reports whether name is a stray partition directory's name.
func IsStrayDir(name string) bool { return strings.HasSuffix(name, StraySuffix) }

// setAside renames the partition directory dir to a stray name in the same
// directory, durably, and reports it (log and metric). attrs are logged.
func (b *Broker) setAside(dir, why string, attrs ...any) error {
	// A name no other stray has: the clock's nanoseconds, bumped until
	// free (the simulator's clock keeps it deterministic).
	n := b.now().UnixNano()
	var to string
	for {
		to = dir + "." + strconv.FormatInt(n, 36) + StraySuffix
		ok, err := vfs.Exists(b.fs, to)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		n++
	}
	if err := b.fs.Rename(dir, to); err != nil {
		return err
	}
	if err := b.fs.SyncDir(path.Dir(dir)); err != nil {
		return err
	}
	metrics.StrayReplicasSetAside.Inc()
	b.log.Warn("set a stray partition directory aside (renamed, not deleted): "+why,
		append([]any{"dir", dir, "now", to}, attrs...)...)
	return nil
}

// setAsideStrays sets aside, once the node acts on current metadata, the
// partition directories in the data directory that im does not assign to
// this node: their topic is gone or the replica moved elsewhere while the
// node was down (Kafka's LogManager finds them the same way at startup).
// A directory of an assigned partition whose topic id differs is handled
// when it is opened (checkTopicID).
func (b *Broker) setAsideStrays(im *metadata.Image) error {
	names, err := b.fs.List(b.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !metaprops.IsPartitionDir(name) {
			continue
		}
		dir := path.Join(b.cfg.DataDir, name)
		st, err := b.fs.Stat(dir)
		if err != nil || !st.IsDir() {
			continue
		}
		topic, part := splitPartitionDir(name)
		t := im.Topics[topic]
		if t != nil && part < int64(len(t.Partitions)) && t.Partitions[part].HasReplica(b.cfg.NodeID) {
			continue
		}
		why := "its topic is not in the metadata"
		if t != nil {
			why = fmt.Sprintf("the metadata does not assign the partition to node %d", b.cfg.NodeID)
		}
		id, idOK := b.dirTopicID(dir)
		if err := b.setAside(dir, why, "metadata_offset", im.Offset); err != nil {
			return err
		}
		// A topic deleted while this node was down: its remote log, if
		// it has one, goes too (the image includes this node's
		// registration, so a topic id missing from it is deleted).
		if idOK && !hasTopicID(im, id) {
			b.deleteStrayRemoteLog(topic, id, int32(part))
		}
	}
	return nil
}

// splitPartitionDir splits a metaprops.IsPartitionDir name.
func splitPartitionDir(name string) (topic string, partition int64) {
	i := strings.LastIndexByte(name, '-')
	p, _ := strconv.ParseInt(name[i+1:], 10, 64)
	return name[:i], p
}

// Stray is a stray partition directory in a data directory.
type Stray struct {
	// Name is the directory's name (topic-N.ID-stray).
	Name string `json:"name"`
	// Bytes is the size of its files.
	Bytes int64 `json:"bytes"`
}

// maxStrays bounds ListStrays.
const maxStrays = 100_000

// ListStrays lists the stray partition directories in dataDir, by name.
func ListStrays(fsys vfs.FS, dataDir string) ([]Stray, error) {
	names, err := fsys.List(dataDir)
	if err != nil {
		return nil, err
	}
	var out []Stray
	for _, name := range names {
		if !IsStrayDir(name) || len(out) >= maxStrays {
			continue
		}
		dir := path.Join(dataDir, name)
		st, err := fsys.Stat(dir)
		if err != nil || !st.IsDir() {
			continue
		}
		s := Stray{Name: name}
		files, _ := fsys.List(dir)
		for _, f := range files {
			if fi, err := fsys.Stat(path.Join(dir, f)); err == nil && !fi.IsDir() {
				s.Bytes += fi.Size()
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// RemoveStray deletes the stray partition directory name from dataDir,
// durably: only a stray's name (no path), never a partition the node uses.
func RemoveStray(fsys vfs.FS, dataDir, name string) error {
	if !IsStrayDir(name) || strings.ContainsAny(name, `/\`) || name == StraySuffix || strings.HasPrefix(name, ".") {
		return fmt.Errorf("%q is not a stray partition directory's name (topic-N.ID%s)", name, StraySuffix)
	}
	dir := path.Join(dataDir, name)
	st, err := fsys.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := fsys.RemoveAll(dir); err != nil {
		return err
	}
	return fsys.SyncDir(dataDir)
}

// Strays lists this node's stray partition directories (ListStrays).
func (b *Broker) Strays() ([]Stray, error) { return ListStrays(b.fs, b.cfg.DataDir) }

// hasTopicID reports whether im has a topic with id.
func hasTopicID(im *metadata.Image, id metadata.UUID) bool {
	for _, t := range im.Topics {
		if t.ID == id {
			return true
		}
	}
	return false
}
