package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/vfs"
)

// A node started without --voters is a controller quorum of itself
// (Kafka 4's `kafka-storage.sh format --standalone`): the same Raft
// controller as a cluster's, with this node as its only voter, so that
// single-node and cluster metadata are one code path and a single node
// can grow into a cluster with `sluice quorum add-controller`.
//
// Its controller listener is --controller-listen (the CONTROLLER
// listener of --config) when given; else a loopback listener on an
// ephemeral port, which nothing outside the process needs until the
// node grows (a node that is to grow is started with a
// --controller-listen the new voters can reach).

// defaultStandaloneListen is the controller listener of a standalone node
// without --controller-listen.
const defaultStandaloneListen = "127.0.0.1:0"

// migratedSuffix ends the name the single-node metadata directory of an
// earlier binary gets once the quorum has imported it: kept, not deleted.
const migratedSuffix = ".migrated"

// standalone is what startController prepared for a node without
// --voters.
type standalone struct {
	ln     net.Listener
	voters []config.Voter
	// imported is the earlier binary's single-node metadata the quorum
	// starts from, nil when there is none.
	imported *metadata.Image
}

// prepareStandalone binds the controller listener of a node without
// --voters, names its quorum of one, and reads the single-node metadata
// an earlier binary left in the data directory, if any.
func prepareStandalone(cfg *config.Broker, selfHost string) (*standalone, error) {
	listen := cfg.ControllerListen
	if listen == "" {
		listen = defaultStandaloneListen
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("controller listener %s: %w", listen, err)
	}
	// The address the quorum records: a wildcard host is the host the
	// node advertises to the other brokers.
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = selfHost
	}
	s := &standalone{ln: ln, voters: []config.Voter{{ID: cfg.NodeID, Addr: net.JoinHostPort(host, port)}}}
	s.imported, err = metadata.ReadStore(vfs.Default, filepath.Join(cfg.DataDir, metaprops.LocalMetadataDir))
	if err != nil {
		ln.Close()
		return nil, err
	}
	return s, nil
}

// standaloneReadyTimeout bounds how long Start waits for a standalone
// node's quorum of one to elect itself and unfence the node.
const standaloneReadyTimeout = 60 * time.Second

// finishStandalone waits until the node's own quorum has made it an
// unfenced broker, as the single-node store did at once, and then sets
// the imported single-node metadata aside under a new name (never
// deleted): from now on the quorum's log holds it.
func finishStandalone(ctrl *controller.Node, cfg *config.Broker, s *standalone, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), standaloneReadyTimeout)
	defer cancel()
	if err := ctrl.WaitReady(ctx); err != nil {
		return fmt.Errorf("the node's controller quorum of one did not make it a broker within %v: %w", standaloneReadyTimeout, err)
	}
	if s.imported == nil {
		return nil
	}
	im := ctrl.Image()
	if im.ClusterID != s.imported.ClusterID {
		return fmt.Errorf("refusing to continue: the metadata log is cluster %s's, but the single-node metadata in %s is cluster %s's", im.ClusterID, metaprops.LocalMetadataDir, s.imported.ClusterID)
	}
	from := filepath.Join(cfg.DataDir, metaprops.LocalMetadataDir)
	to := from + migratedSuffix
	if _, err := os.Stat(to); err == nil {
		to = fmt.Sprintf("%s.%d", to, time.Now().UnixNano())
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := vfs.Default.SyncDir(cfg.DataDir); err != nil {
		return err
	}
	logger.Info("single-node metadata of an earlier version imported into this node's controller quorum; the old store is kept, renamed",
		"cluster", im.ClusterID, "topics", len(s.imported.Topics), "kept", to)
	return nil
}
