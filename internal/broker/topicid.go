package broker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"path"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/vfs"
)

// partitionMetadataName is the file naming the topic id a partition
// directory belongs to (Kafka's PartitionMetadataFile, KIP-516): directory
// names carry only the topic's name, and a topic deleted and recreated
// under the same name must never be served from the old one's data.
const partitionMetadataName = "partition.metadata"

// encodePartitionMetadata is Kafka's format: a version line and the topic
// id in Kafka's Uuid text form (URL-safe base64, no padding).
func encodePartitionMetadata(id metadata.UUID) []byte {
	return []byte("version: 0\ntopic_id: " + base64.RawURLEncoding.EncodeToString(id[:]) + "\n")
}

// decodePartitionMetadata parses encodePartitionMetadata's format; ok is
// false for anything else (a torn or foreign file).
func decodePartitionMetadata(b []byte) (id metadata.UUID, ok bool) {
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) < 2 || string(lines[0]) != "version: 0" {
		return id, false
	}
	v, found := bytes.CutPrefix(lines[1], []byte("topic_id: "))
	if !found {
		return id, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(v))
	if err != nil || len(raw) != len(id) {
		return id, false
	}
	copy(id[:], raw)
	return id, true
}

// checkTopicID makes dir safe to open as a partition of topic id: a
// directory whose partition.metadata names another topic id holds another
// topic's partition (a topic of the same name deleted while this node was
// away, or recreated between two metadata images it applied) and is set
// aside as a stray (setAside), never deleted. It reports whether
// partition.metadata must be (re)written after the open: missing (a new
// partition, or one from before this file existed, which is adopted),
// unreadable, or set aside with its directory.
func (b *Broker) checkTopicID(dir string, id metadata.UUID) (write bool, err error) {
	data, err := vfs.ReadFile(b.fs, path.Join(dir, partitionMetadataName), 1024)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	got, ok := decodePartitionMetadata(data)
	if !ok {
		return true, nil
	}
	if got == id {
		return false, nil
	}
	if err := b.setAside(dir, "it belongs to another topic of the same name", "its_topic_id", got.String(), "topic_id", id.String()); err != nil {
		return false, err
	}
	if im := b.Image(); im != nil && !hasTopicID(im, got) {
		topic, part := splitPartitionDir(path.Base(dir))
		b.deleteStrayRemoteLog(topic, got, int32(part))
	}
	return true, b.fs.MkdirAll(dir, 0o755)
}

// writeTopicID writes dir's partition.metadata. It is not synced: a file
// lost in a crash is written again at the next open (and a torn one reads
// as missing).
func (b *Broker) writeTopicID(dir string, id metadata.UUID) error {
	f, err := b.fs.Create(path.Join(dir, partitionMetadataName))
	if err != nil {
		return err
	}
	if _, err := f.Write(encodePartitionMetadata(id)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// replaced removes from the local replicas, and returns, those whose topic
// im has under another id: the topic was deleted and recreated under the
// same name since they were opened.
func (b *Broker) replaced(im *metadata.Image) []*Partition {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*Partition
	for tp, p := range b.parts {
		if t := im.Topics[tp.Topic]; t != nil && t.ID != p.topicID {
			delete(b.parts, tp)
			b.partList = nil
			out = append(out, p)
		}
	}
	return out
}

// dirTopicID is the topic id in dir's partition.metadata, if it has a
// readable one.
func (b *Broker) dirTopicID(dir string) (metadata.UUID, bool) {
	data, err := vfs.ReadFile(b.fs, path.Join(dir, partitionMetadataName), 1024)
	if err != nil {
		return metadata.UUID{}, false
	}
	return decodePartitionMetadata(data)
}
