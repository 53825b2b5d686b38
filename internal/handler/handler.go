// Package handler serves the Kafka API: one file per API key, named after
// the key (00_produce.go, 01_fetch.go, ...), each opening with the versions
// it serves and how it behaves. Handlers decode nothing themselves: kmsg
// structs come in, kmsg structs go out.
package handler

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/fetchsession"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/quota"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/sharecoord"
	"github.com/sluice-io/sluice/internal/txn"
)

// Handlers serves requests against one broker.
type Handlers struct {
	b *broker.Broker
	// onMarker is called after a transaction marker is replicated on a
	// partition this node leads (WriteTxnMarkers).
	onMarker []func(topic string, partition int32, producerID int64, commit bool)
	// txnVersion is the finalized transaction.version (registerTxnAPIs).
	txnVersion int16
	groups     *group.Coordinator
	txns       *txn.Coordinator
	// shareState is the share coordinator's and the share-group offsets
	// APIs' (sharestate.go).
	shareState *shareStateAPI
	sessions   *fetchsession.Cache
	splice     bool // zero-copy fetch responses (fetch_splice.go)
	// auth decides requests when authorizer.class.name is set; nil
	// allows everything (authz.go).
	auth *acl.Authorizer
	// produceQuota and fetchQuota keep the client byte rates,
	// requestQuota the request times (quota.go).
	produceQuota, fetchQuota, requestQuota *quota.Manager
	// rackAware is replica.selector.class=RackAwareReplicaSelector
	// (KIP-392; 01_fetch.go).
	rackAware bool
	// share holds the share partitions and share sessions (KIP-932;
	// share_partitions.go).
	share sharePartState
}

// Options tune the handlers.
type Options struct {
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots:
	// the most fetch sessions (KIP-227) at once; 0 disables them.
	FetchSessionCacheSlots int
	// FetchSessionMaxPartitions bounds one fetch session's partitions
	// (fetchsession.DefaultMaxPartitions if 0).
	FetchSessionMaxPartitions int
	// NoSplice copies every fetched record set into its response instead
	// of sending the larger ones from the log files (fetch_splice.go).
	NoSplice bool
	// Txn is the transaction coordinator to serve with (the simulator's
	// stepped one, txn.Options.Stepped); nil creates one from the broker
	// properties.
	Txn *txn.Coordinator
	// Groups is the group coordinator to serve with (the simulator's
	// stepped one, group.Options.Stepped); nil creates one.
	Groups *group.Coordinator
	// SharePersister keeps the share partitions' state (KIP-932); nil is
	// the share coordinators' (__share_group_state, SharePersister).
	SharePersister share.Persister
	// ShareCoordinator is the share coordinator to serve with (the
	// simulator's stepped one, sharecoord.Options.Stepped); nil creates
	// one from the broker properties.
	ShareCoordinator *sharecoord.Coordinator
	// WatchShareConn, when set, replaces the goroutine that waits for a
	// connection with share sessions to close: it is given the
	// connection and the release to run once it closed (the simulator
	// runs it itself, deterministically). Set, a share request also
	// keeps its work on its own goroutine: its acknowledgements are made
	// durable before it acquires records, one partition after the other.
	WatchShareConn func(c *protocol.Conn, release func())
	// StepShareExpiry leaves the persisting of expired share locks to
	// the caller's ExpireShareLocks (the simulator, on its clock) instead
	// of a goroutine.
	StepShareExpiry bool
}

// OptionsFromConfig reads the handler settings from the broker's
// configuration (Kafka's defaults where unset).
func OptionsFromConfig(cfg *config.Broker) Options {
	return Options{FetchSessionCacheSlots: int(cfg.Int("max.incremental.fetch.session.cache.slots", fetchsession.DefaultSlots))}
}

// FetchSessions returns the fetch-session cache's sizes and evictions.
func (h *Handlers) FetchSessions() fetchsession.Stats { return h.sessions.Stats() }

// Close stops the handlers' background work (the group and transaction
// coordinators' timers and marker senders); call it before closing the
// broker.
func (h *Handlers) Close() {
	h.stopShareSweep()
	if h.txns != nil {
		h.txns.Close()
	}
	if h.shareState != nil {
		h.shareState.c.Close()
	}
	if h.groups != nil {
		h.groups.Close()
	}
	if h.share.dlq != nil {
		h.share.dlq.close()
	}
}

// Transactions returns the transaction coordinator.
func (h *Handlers) Transactions() *txn.Coordinator { return h.txns }

// Groups returns the consumer-group coordinator (for the status pages).
func (h *Handlers) Groups() *group.Coordinator { return h.groups }

// Register installs every implemented API into reg, with the options of
// the broker's configuration.
func Register(reg *protocol.Registry, b *broker.Broker) *Handlers {
	return RegisterWith(reg, b, OptionsFromConfig(b.Config()))
}

// RegisterWith installs every implemented API into reg.
func RegisterWith(reg *protocol.Registry, b *broker.Broker, opts Options) *Handlers {
	h := &Handlers{b: b, sessions: fetchsession.New(fetchsession.Config{
		Slots: opts.FetchSessionCacheSlots, MaxPartitions: opts.FetchSessionMaxPartitions, Now: b.Now,
	}), splice: !opts.NoSplice, auth: authorizerFromConfig(b.Config()),
		produceQuota: quota.New(metadata.QuotaProducerByteRate, quotaConfig(b.Config())),
		fetchQuota:   quota.New(metadata.QuotaConsumerByteRate, quotaConfig(b.Config())),
		requestQuota: quota.New(metadata.QuotaRequestPercentage, quotaConfig(b.Config()))}
	if sel, _ := b.Config().Get("replica.selector.class"); sel != "" {
		h.rackAware = true // the only selector config.Def accepts
	}
	reg.SetRequestTime(h.recordRequestTime)
	for _, api := range []protocol.Handler{
		{Key: 0, MinVersion: 0, MaxVersion: 12, Serve: h.withProduceQuota(h.produce)},
		{Key: 1, MinVersion: 4, MaxVersion: fetchMaxVersion, Serve: h.fetch},
		{Key: 2, MinVersion: 1, MaxVersion: 10, Serve: h.listOffsets},
		{Key: 3, MinVersion: 0, MaxVersion: 12, Serve: h.metadata},
		{Key: 19, MinVersion: 0, MaxVersion: 7, Serve: h.createTopics},
		{Key: 20, MinVersion: 0, MaxVersion: 6, Serve: h.deleteTopics},
		{Key: 21, MinVersion: 0, MaxVersion: 2, Serve: h.deleteRecords},
		{Key: 22, MinVersion: 0, MaxVersion: 4, Serve: h.initProducerID},
		{Key: 23, MinVersion: 0, MaxVersion: 4, Serve: h.offsetForLeaderEpoch},
		{Key: 29, MinVersion: 0, MaxVersion: 3, Serve: h.describeAcls},
		{Key: 30, MinVersion: 0, MaxVersion: 3, Serve: h.createAcls},
		{Key: 31, MinVersion: 0, MaxVersion: 3, Serve: h.deleteAcls},
		{Key: 32, MinVersion: 0, MaxVersion: 4, Serve: h.describeConfigs},
		{Key: 33, MinVersion: 0, MaxVersion: 2, Serve: h.alterConfigs},
		{Key: 35, MinVersion: 0, MaxVersion: 4, Serve: h.describeLogDirs},
		{Key: 37, MinVersion: 0, MaxVersion: 3, Serve: h.createPartitions},
		{Key: 43, MinVersion: 0, MaxVersion: 2, Serve: h.electLeaders},
		{Key: 44, MinVersion: 0, MaxVersion: 1, Serve: h.incrementalAlterConfigs},
		{Key: 45, MinVersion: 0, MaxVersion: 0, Serve: h.alterPartitionReassignments},
		{Key: 46, MinVersion: 0, MaxVersion: 0, Serve: h.listPartitionReassignments},
		{Key: 48, MinVersion: 0, MaxVersion: 1, Serve: h.describeClientQuotas},
		{Key: 49, MinVersion: 0, MaxVersion: 1, Serve: h.alterClientQuotas},
		{Key: 50, MinVersion: 0, MaxVersion: 0, Serve: h.describeUserScramCredentials},
		{Key: 51, MinVersion: 0, MaxVersion: 0, Serve: h.alterUserScramCredentials},
		{Key: 60, MinVersion: 0, MaxVersion: 1, Serve: h.describeCluster},
		{Key: 75, MinVersion: 0, MaxVersion: 0, Serve: h.describeTopicPartitions},
		{Key: 64, MinVersion: 0, MaxVersion: 0, Serve: h.unregisterBroker},
		{Key: 55, MinVersion: 0, MaxVersion: 2, Serve: h.describeQuorum},
		{Key: 57, MinVersion: 0, MaxVersion: 2, Serve: h.updateFeatures},
		{Key: 80, MinVersion: 0, MaxVersion: 1, Serve: h.addRaftVoter},
		{Key: 81, MinVersion: 0, MaxVersion: 0, Serve: h.removeRaftVoter},
		{Key: 27, MinVersion: 0, MaxVersion: 2, Serve: h.writeTxnMarkers},
		{Key: 61, MinVersion: 0, MaxVersion: 0, Serve: h.describeProducers},
	} {
		reg.Register(api)
	}
	h.registerGroupAPIs(reg, opts.Groups)
	// kraft.version and eligible.leader.replicas.version, finalized in
	// the metadata (57_update_features.go).
	for _, name := range []string{metadata.FeatureKRaftVersion, metadata.FeatureELRVersion} {
		kv := metadata.SupportedFeatures()[name]
		reg.SetFeature(protocol.Feature{Name: name, Min: kv.Min, Max: kv.Max, Level: func() (int16, int64) {
			im := h.b.Image()
			return im.FeatureLevel(name), im.Offset
		}})
	}
	// group.version (KIP-848), finalized in the metadata.
	gv := metadata.SupportedFeatures()[metadata.FeatureGroupVersion]
	reg.SetFeature(protocol.Feature{Name: metadata.FeatureGroupVersion, Min: gv.Min, Max: gv.Max, Level: func() (int16, int64) {
		im := h.b.Image()
		return im.GroupVersion(), im.Offset
	}})
	h.registerTxnAPIs(reg, opts.Txn)
	h.registerShareStateAPIs(reg, opts.ShareCoordinator)
	if opts.SharePersister == nil {
		opts.SharePersister = h.SharePersister()
	}
	h.registerShareAPIs(reg, opts.SharePersister)
	h.share.watch = opts.WatchShareConn
	if !opts.StepShareExpiry {
		h.sweepShareExpiry()
	}
	h.share.oneGoroutine = opts.WatchShareConn != nil
	// The share group coordinator deletes share-partition state through
	// the share coordinator, which asks it whether a group is empty.
	h.groups.SetSharePersister(opts.SharePersister)
	h.SetShareGroupState(h.groups.ShareGroupState)
	h.gateShareAPIs(reg)
	return h
}

// code maps an error to its Kafka error code: a *kerr.Error anywhere in the
// chain gives its code, anything else UNKNOWN_SERVER_ERROR.
func code(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// message returns a pointer to err's text for ErrorMessage fields, or nil.
func message(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// endpoint returns br's address on the listener r came in on. ok is false
// when br has no such listener: Kafka leaves such a broker out of a
// response on that listener (Metadata, DescribeCluster) and treats a
// coordinator without it as not available.
func endpoint(r *protocol.Request, br metadata.Broker) (host string, port int32, ok bool) {
	e, ok := br.Endpoint(r.Conn.Listener())
	return e.Host, e.Port, ok
}
