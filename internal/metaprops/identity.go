package metaprops

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/vfs"
)

// A data directory belongs to one cluster and one node. Two starts must
// never put it in another cluster, because the other cluster's metadata
// does not know its partitions and would treat them as strays (or, for a
// topic re-created under the same name, as a deleted topic's data):
//
//   - a quorum member's directory started without --voters, which would
//     start a new single-node cluster on it;
//   - a single-node cluster's directory started with --voters, which
//     would join (or start) another quorum.
//
// Open refuses both before anything in the directory is read or written
// beyond meta.properties and the metadata's cluster id. A quorum member
// learns its cluster id from the metadata log; Identity.Join checks (or
// records) it before the node acts on that metadata.

// Names of the metadata stores in a data directory.
const (
	// LocalMetadataDir holds a single-node cluster's metadata.
	LocalMetadataDir = "__cluster_metadata"
	// RaftDir holds a quorum voter's metadata log.
	RaftDir = "__raft"
)

// Layout is what a start finds in a data directory besides its
// meta.properties, as far as its identity is concerned.
type Layout struct {
	// LocalClusterID is the cluster id of the single-node metadata in
	// LocalMetadataDir, "" when there is none.
	LocalClusterID string
	// Raft reports a quorum voter's metadata log (RaftDir).
	Raft bool
	// Partitions counts partition directories (topic-N).
	Partitions int
}

// ScanLayout reads dir's layout; a missing directory has an empty one.
func ScanLayout(dir string) (Layout, error) {
	var l Layout
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		switch name := e.Name(); {
		case name == RaftDir:
			l.Raft = true
		case name == LocalMetadataDir:
			if l.LocalClusterID, err = metadata.StoredClusterID(vfs.Default, filepath.Join(dir, name)); err != nil {
				return l, err
			}
		case IsPartitionDir(name):
			l.Partitions++
		}
	}
	return l, nil
}

// IsPartitionDir reports whether name has a partition directory's form,
// topic-N (a stray's name, topic-N.ID-stray, does not).
func IsPartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 || len(name)-i > 11 {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Start is how the node is being started.
type Start struct {
	// Quorum is set when the node belongs to a controller quorum
	// (--voters, controller.quorum.voters); unset, it is a single-node
	// cluster of its own.
	Quorum bool
	// NewClusterID is the id a new single-node cluster takes; it is
	// named in a refusal.
	NewClusterID string
}

// Identity is a data directory's accepted identity: meta.properties as
// written at the start, and the cluster id once known.
type Identity struct {
	dir   string
	found bool
	mu    sync.Mutex
	p     Props
}

// Open checks that dir may be started as node nodeID in the way start
// says, and writes meta.properties if the directory has none. A refused
// start changes nothing on disk; its error names the directory's cluster
// id, the one the start would give it, and the flag the operator
// probably forgot.
func Open(dir string, nodeID int32, start Start) (*Identity, error) {
	p, found, err := Read(dir, nodeID)
	if err != nil {
		return nil, err
	}
	l, err := ScanLayout(dir)
	if err != nil {
		return nil, err
	}
	if err := check(dir, p, l, start); err != nil {
		return nil, err
	}
	if !found {
		if p, err = newProps(nodeID); err != nil {
			return nil, err
		}
		if err := write(dir, p); err != nil {
			return nil, err
		}
	}
	return &Identity{dir: dir, found: found, p: p}, nil
}

// check is Open's decision on what it read.
func check(dir string, p Props, l Layout, start Start) error {
	path := filepath.Join(dir, FileName)
	if !start.Quorum {
		// A node without --voters is a controller quorum of itself: its
		// metadata is a log in RaftDir (whose quorum the controller
		// checks to be this node alone before raft starts), or the
		// single-node store of an earlier binary in LocalMetadataDir,
		// which the quorum imports.
		switch {
		case p.ClusterID != "" && l.LocalClusterID != "" && l.LocalClusterID != p.ClusterID:
			return fmt.Errorf("refusing to start: %s says the data directory belongs to cluster %s, but its single-node metadata (%s) is cluster %s's: the directory was assembled from two clusters; restore it from one",
				path, p.ClusterID, LocalMetadataDir, l.LocalClusterID)
		case l.LocalClusterID != "" || l.Raft:
			return nil
		case p.ClusterID != "":
			return fmt.Errorf("refusing to start: %s says the data directory belongs to cluster %s, and without --voters this node would start a new single-node cluster %s on it, whose metadata does not know the directory's partitions; start it with the --voters (controller.quorum.voters) of cluster %s's quorum, or give a new single-node cluster its own --data-dir",
				path, p.ClusterID, start.NewClusterID, p.ClusterID)
		case l.Partitions > 0:
			return fmt.Errorf("refusing to start: the data directory %s holds a controller quorum member's data (%s) and no metadata of its own, and without --voters this node would start a new single-node cluster %s on it, whose metadata does not know the directory's partitions; start it with the --voters (controller.quorum.voters) of the cluster it belongs to, or give a new single-node cluster its own --data-dir",
				dir, describe(l), start.NewClusterID)
		}
		return nil
	}
	if l.LocalClusterID != "" && !l.Raft {
		return fmt.Errorf("refusing to start: the data directory %s holds single-node cluster %s (its metadata is in %s), and with --voters this node would join another cluster's quorum, whose metadata does not know the directory's partitions; start it without --voters, or give the quorum member its own --data-dir",
			dir, l.LocalClusterID, LocalMetadataDir)
	}
	return nil
}

// describe names what a layout holds, for a refusal.
func describe(l Layout) string {
	var parts []string
	if l.Raft {
		parts = append(parts, "a metadata log in "+RaftDir)
	}
	if l.Partitions > 0 {
		parts = append(parts, fmt.Sprintf("%d partition directories", l.Partitions))
	}
	return strings.Join(parts, " and ")
}

// Existed reports whether the directory had its meta.properties before
// this start (it is not a new or wiped directory).
func (id *Identity) Existed() bool { return id.found }

// Props returns the directory's meta.properties as they stand.
func (id *Identity) Props() Props {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.p
}

// Join is called with the cluster id of the metadata the node is about to
// act on. The first id is recorded in meta.properties (durably) if the
// directory had none; an id other than the recorded one is refused, and
// the node must stop without acting on that metadata.
func (id *Identity) Join(clusterID string) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	switch id.p.ClusterID {
	case clusterID:
		return nil
	case "":
		p := id.p
		p.ClusterID = clusterID
		if err := write(id.dir, p); err != nil {
			return err
		}
		id.p = p
		return nil
	}
	return fmt.Errorf("refusing to act on the metadata of cluster %s: %s says the data directory belongs to cluster %s; check --voters (controller.quorum.voters): it names another cluster's quorum",
		clusterID, filepath.Join(id.dir, FileName), id.p.ClusterID)
}
