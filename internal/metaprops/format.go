package metaprops

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-io/sluice/internal/vfs"
)

// A data directory formatted before its first start (`sluice storage
// format`, Kafka's kafka-storage.sh format) holds meta.properties with
// its cluster id and the quorum to bootstrap: Kafka writes the voter set
// into the metadata log's bootstrap checkpoint
// (__cluster_metadata-0/00000000000000000000-0000000000.checkpoint);
// sluice writes it as BootstrapFile, read at the first start of a node
// given no --voters (controller.quorum.voters). The quorum is formed with
// the formatted cluster id and, once it has a metadata log, the log
// alone says who the voters are (KIP-853): the file is not read again.

// BootstrapFile names the formatted quorum in a data directory.
const BootstrapFile = "quorum-bootstrap.properties"

// Bootstrap is a formatted directory's quorum.
type Bootstrap struct {
	// ClusterID is the cluster id given to format.
	ClusterID string
	// Voters is the initial quorum in controller.quorum.voters' form
	// (id@host:port,...): this node alone for --standalone, else
	// --initial-controllers without their directory ids.
	Voters string
}

// RandomUUID returns a new random id in Kafka's Uuid form (16 bytes,
// base64 URL-safe without padding: 22 characters), as
// kafka-storage.sh random-uuid prints.
func RandomUUID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// CheckUUID checks that s has Kafka's Uuid form (Uuid.fromString): 22
// characters of base64 URL-safe that decode to 16 bytes.
func CheckUUID(s string) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) != 22 || len(b) != 16 {
		return fmt.Errorf("%q is not a Kafka Uuid (22 characters of base64 URL-safe, as `sluice storage random-uuid` prints)", s)
	}
	return nil
}

// ErrFormatted is returned by Format for a directory that already has a
// meta.properties.
var ErrFormatted = errors.New("already formatted")

// Format writes a new data directory's meta.properties (cluster id, node
// id, directory id) and its BootstrapFile. It refuses a directory that
// already has a meta.properties (ErrFormatted), as kafka-storage.sh
// does, and changes nothing then.
func Format(dir string, nodeID int32, directoryID string, b Bootstrap) error {
	if _, found, err := Read(dir, nodeID); err != nil {
		return err
	} else if found {
		return fmt.Errorf("%w: %s exists", ErrFormatted, filepath.Join(dir, FileName))
	}
	if err := CheckUUID(b.ClusterID); err != nil {
		return fmt.Errorf("cluster id: %w", err)
	}
	p, err := newProps(nodeID)
	if err != nil {
		return err
	}
	if directoryID != "" {
		p.DirectoryID = directoryID
	}
	p.ClusterID = b.ClusterID
	if err := vfs.MkdirAllDurable(vfs.Default, dir); err != nil {
		return err
	}
	text := "# the quorum `sluice storage format` bootstrapped; read at the first start only\n" +
		"cluster.id=" + b.ClusterID + "\ncontroller.quorum.voters=" + b.Voters + "\n"
	if err := vfs.WriteFileAtomic(vfs.Default, filepath.Join(dir, BootstrapFile), []byte(text), true); err != nil {
		return err
	}
	return write(dir, p)
}

// ReadBootstrap reads dir's BootstrapFile; found is false without one.
func ReadBootstrap(dir string) (b Bootstrap, found bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, BootstrapFile))
	if errors.Is(err, os.ErrNotExist) {
		return b, false, nil
	}
	if err != nil {
		return b, false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		switch {
		case !ok || strings.HasPrefix(k, "#"):
		case k == "cluster.id":
			b.ClusterID = v
		case k == "controller.quorum.voters":
			b.Voters = v
		}
	}
	if b.ClusterID == "" || b.Voters == "" {
		return b, false, fmt.Errorf("%s: no cluster.id or controller.quorum.voters", filepath.Join(dir, BootstrapFile))
	}
	return b, true, nil
}
