package controller

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/sluice-io/sluice/internal/metadata"
)

// A standalone node (Config.Standalone: started without --voters) is a
// quorum of one, Kafka 4's `kafka-storage.sh format --standalone`: the
// same controller as a cluster's, with itself as the only voter. It can
// grow into a cluster through AddRaftVoter (KIP-853) like any quorum.

// ErrNotStandalone is wrapped by Start's refusal of a standalone start on
// a quorum member's metadata log.
var ErrNotStandalone = errors.New("refusing to start")

// checkStandalone refuses a standalone start on a metadata log whose
// latest configuration is not this node alone: the directory is a
// quorum member's, started without its --voters. Nothing is changed:
// the log is opened read-only and its configuration read without
// starting raft.
func (n *Node) checkStandalone(dir string, hlog hclog.Logger) error {
	path := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	var ready bool
	db.View(func(tx *bolt.Tx) error {
		ready = tx.Bucket(bucketLogs) != nil && tx.Bucket(bucketStable) != nil
		return nil
	})
	if !ready {
		return nil
	}
	store := &boltStore{db: db}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return err
	}
	if has, err := raft.HasExistingState(store, store, snaps); err != nil || !has {
		return err
	}
	conf, err := latestConfiguration(store, snaps)
	if err != nil {
		return fmt.Errorf("controller: reading the metadata log's quorum: %w", err)
	}
	self := serverID(n.cfg.NodeID)
	var others []string
	for _, s := range conf.Servers {
		if s.ID != self {
			others = append(others, fmt.Sprintf("%s@%s", s.ID, s.Address))
		}
	}
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	return fmt.Errorf("%w: the metadata log in %s belongs to a controller quorum with other members (%s), and without --voters this node would start a new single-node cluster on the directory, a quorum of itself; start it with that quorum's --voters (controller.quorum.voters), or give a new single-node cluster its own --data-dir",
		ErrNotStandalone, dir, strings.Join(others, ","))
}

// latestConfiguration is the raft configuration a log and its snapshots
// hold, read without starting raft (whose start writes to the log): the
// last configuration entry of the log, else the newest snapshot's.
func latestConfiguration(store *boltStore, snaps raft.SnapshotStore) (raft.Configuration, error) {
	first, err := store.FirstIndex()
	if err != nil {
		return raft.Configuration{}, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return raft.Configuration{}, err
	}
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			return raft.Configuration{}, err
		}
		if l.Type == raft.LogConfiguration {
			return raft.DecodeConfiguration(l.Data), nil
		}
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return raft.Configuration{}, err
	}
	return metas[0].Configuration, nil
}

// updateOwnAddress records this standalone voter's controller address in
// the raft configuration when it changed since the log was written (a
// loopback listener on an ephemeral port is another port on every
// start): raft's AddVoter of an existing voter changes its address. The
// voters a grown quorum adds find the first node at the new address.
func (a *active) updateOwnAddress() {
	n := a.n
	ss, err := a.servers()
	if err != nil {
		return
	}
	for _, s := range ss {
		if s.ID == serverID(n.cfg.NodeID) && string(s.Address) != n.raftAddr && s.Suffrage == raft.Voter {
			if err := n.raft.AddVoter(s.ID, raft.ServerAddress(n.raftAddr), 0, 0).Error(); err != nil {
				n.log.Warn("recording this voter's new controller address", "addr", n.raftAddr, "err", err)
				return
			}
			n.log.Info("controller address recorded in the quorum's configuration", "was", s.Address, "now", n.raftAddr)
		}
	}
}

// importRecord is the record that starts a new quorum from an earlier
// binary's single-node metadata (Config.Import): the cluster id, topics,
// configs, ACLs, SCRAM credentials, quotas, dynamic configs and the
// producer-id counter, not the broker registrations (the node registers
// again, as on every start). Each partition comes in without a leader,
// its replicas and ISR as the store had them (the node alone), and is
// elected when the node's registration is unfenced, as after any restart.
func importRecord(old *metadata.Image) record {
	im := emptyImage()
	im.ClusterID = old.ClusterID
	im.NextProducerID = max(old.NextProducerID, initialNextProducer)
	im.Scram, im.Acls, im.Quotas = old.Scram, old.Acls, old.Quotas
	im.BrokerConfigs, im.GroupConfigs = old.BrokerConfigs, old.GroupConfigs
	for name, t := range old.Topics {
		nt := *t
		nt.Partitions = slices.Clone(t.Partitions)
		for i := range nt.Partitions {
			p := &nt.Partitions[i]
			p.Leader = noLeader
			p.AddingReplicas, p.RemovingReplicas, p.Recovering = nil, nil, false
		}
		im.Topics[name] = &nt
	}
	return record{Type: recImport, Import: im}
}
