// Package broker is a node's data plane: its partition replicas (each a
// replica state machine driven over a local log), the follower fetchers
// that replicate from other brokers, and the operations the Kafka handlers
// call. It follows committed metadata from a metadata.Controller (the
// single-node Local store, or the Raft quorum) and never acts on anything
// uncommitted.
package broker

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Options configure a Broker.
type Options struct {
	Config *config.Broker
	// FS is where data lives. Default vfs.Default (the OS).
	FS vfs.FS
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock is the time source of the broker, its partitions, fetchers,
	// flusher and cleaner. Default clock.Real.
	Clock clock.Clock
	// Steps starts no background goroutine: no tick, retention or cleaner
	// loop, no flush workers, no fetcher goroutines, no ISR-proposal
	// goroutines, no remote log manager loop or remote reader pool. The
	// owner drives the broker on its own goroutine with StepTick,
	// StepAlter, StepFlush, StepFetch, StepRetention, StepClean and
	// StepRemote (the simulator, which owns the clock and the network,
	// does). Default false.
	Steps bool
	// Knobs re-introduce fixed bugs, for the simulator's tests that it
	// still finds them. Nil in production.
	Knobs *Knobs
	// CheckWriters makes every change of a partition's log check that it
	// runs as a step of the partition's owner, its one writer
	// (storage.Writer.Check; WriterViolations counts the others). A test
	// aid: it costs a stack read per step. Default false.
	CheckWriters bool
	// Transport carries follower fetches to leaders. Default: TCP to the
	// leader's inter-broker listener.
	Transport Transport
	// Controller is the metadata authority. A node (internal/node) always
	// gives its controller.Node, a single node's quorum of one included.
	// Default: metadata.Local in DataDir/__cluster_metadata, the
	// single-node store of earlier releases, which in-process unit tests
	// run on.
	Controller metadata.Controller
	// NewClusterID is the id a new single-node cluster (the default
	// Controller) takes. Default: a random one.
	NewClusterID string
	// JoinCluster, when set, is called with the cluster id of an image
	// before the broker acts on it (once per id): the data directory's
	// identity check (metaprops.Identity.Join). On an error the broker
	// does not act on the image, and calls OnFatal (Open returns the
	// error instead). While it is set, an image without a cluster id is
	// not acted on. Default: nil, no check.
	JoinCluster func(clusterID string) error
	// RemoteStore is the object store of tiered storage (KIP-405), set
	// when remote.log.storage.system.enable=true (objstore.FromConfig):
	// with it, the remote log manager copies the segments of topics with
	// remote.storage.enable to it (rlm.go). Default nil: no copies, and
	// such topics keep every segment locally.
	RemoteStore objstore.Store
	// OnFatal is called, once, when the data directory fails (see
	// logDirFailed), after the broker logged the failure and stopped
	// acknowledging. It must halt the process: Kafka calls Exit.halt(1).
	// It may run with a partition lock held, so it must not call into the
	// Broker. Default: os.Exit(1). Tests set it to observe the failure.
	OnFatal func(error)
	// RemoteMetadata is the remote log metadata that fetches below a
	// partition's local log start read the remote log by (remote.go).
	// Default nil: with RemoteStore, the broker's own
	// __remote_log_metadata store (rlmstore.go); tests set another.
	RemoteMetadata remote.Metadata
	// Rand is the source of the random ids the broker makes (remote log
	// segment ids, rlm.go). Default crypto/rand; the simulator gives a
	// seeded one, so that a seed replays exactly.
	Rand io.Reader
}

// Broker is one sluice node's data plane.
type Broker struct {
	cfg   *config.Broker
	fs    vfs.FS
	log   *slog.Logger
	clock clock.Clock
	ctrl  metadata.Controller

	mu    sync.RWMutex
	parts map[TP]*Partition
	// partList caches the values of parts for the tick loop (mu); nil
	// after any change.
	partList []*Partition
	flusher  *flusher
	fetchers map[int32]*fetcher
	img      *metadata.Image
	topicIDs map[metadata.UUID]string // img's topics by id
	hwCheck  map[TP]int64             // checkpointed HWs read at startup
	// lastHWCheck is the HW checkpoint last written (owned by the tick
	// loop, then by Close once it has stopped).
	lastHWCheck []byte

	applyMu sync.Mutex // serializes reconcile
	// joinCluster is Options.JoinCluster; joined is the cluster id it
	// accepted last (applyMu).
	joinCluster func(string) error
	joined      string
	listeners   []func(tp TP, isLeader bool, leaderEpoch int32)
	// caughtUp is set once an image holds this incarnation's registration:
	// images before it are history being replayed (a restarted node's
	// metadata log), which must not be acted on — a replayed image can
	// name this node leader of an epoch long over. Like a KRaft broker,
	// sluice starts acting only once caught up with the metadata log.
	caughtUp atomic.Bool
	// applied is closed at the end of the first reconcile after caughtUp:
	// the partitions of that image are open and its topic ids resolve.
	applied     chan struct{}
	appliedOnce sync.Once

	// dirFailed is set once the data directory failed: from then on
	// nothing is acknowledged (logDirFailed).
	dirFailed atomic.Bool
	// retryOpen is set when partitions could not be opened for want of
	// file descriptors; the tick loop applies the image again.
	retryOpen atomic.Bool
	// retentionAt is when (UnixNano, by the clock) the latest completed
	// retention pass started (retention.go).
	retentionAt atomic.Int64
	onFatal     func(error)

	// stats are the per-topic produce and fetch counters (stats.go).
	stats topicStats
	// inter is how fetchers reach leaders (interbroker.go), over
	// transport (Options.Transport).
	inter     *interBroker
	transport Transport
	// peers are the clients coordinators send requests to other brokers
	// with (peer.go).
	peers peerCache
	// steps: Options.Steps (steps.go).
	steps bool
	knobs Knobs
	// checkWriters: Options.CheckWriters (owner.go).
	checkWriters bool
	alters       alterQueue
	tickSt       tickState

	// leaderQuota and followerQuota are the replication throttles
	// (replquota.go, KIP-73).
	leaderQuota, followerQuota *replQuota
	// cleaner is the running log cleaner, nil when disabled or in step
	// mode (cleaner.go).
	cleaner atomic.Pointer[cleaner]
	// rlm is the remote log manager, nil without Options.RemoteStore
	// (rlm.go).
	rlm *rlm
	// rand is Options.Rand.
	rand io.Reader
	// configHooks are called after the dynamic broker configs changed
	// (OnDynamicConfig).
	configHooks []func()

	// ctx is cancelled and closing closed by Close: every goroutine the
	// broker starts ends on one or the other. wg counts the loops (tick,
	// retention, cleaner); bgN the goroutines started on demand by
	// goBackground (ISR proposals, fetcher stops, failing waiters after a
	// disk failure), which Close waits for.
	ctx      context.Context
	cancel   context.CancelFunc
	closing  chan struct{}
	wg       sync.WaitGroup
	bgMu     sync.Mutex
	bgIdle   *sync.Cond // (bgMu) broadcast when bgN drops to zero
	bgN      int        // (bgMu)
	bgClosed bool       // (bgMu) set by Close: goBackground refuses

	// remote is the remote log reader and its pool, nil without remote
	// storage (remote.go).
	remote *remoteReads
}

// SelfBroker returns the registration this node advertises to clients and
// other brokers: one endpoint per Kafka listener (advertised.listeners by
// listener name, else the listener's own address; config.AdvertisedListeners),
// with Host and Port those of the inter-broker listener
// (inter.broker.listener.name), which nodes that read only Host and Port
// dial. A wildcard host advertises the machine's first non-loopback IPv4
// address (127.0.0.1 if it has none), so brokers in separate network
// namespaces reach each other. The --http address is advertised beside it
// (metadata.Broker.HTTP), with a wildcard host replaced the same way, for
// the other nodes' consoles.
func SelfBroker(cfg *config.Broker) (metadata.Broker, error) {
	adv, err := cfg.AdvertisedListeners()
	if err != nil {
		return metadata.Broker{}, err
	}
	inter, err := cfg.InterBrokerListenerName()
	if err != nil {
		return metadata.Broker{}, err
	}
	self := metadata.Broker{ID: cfg.NodeID, HTTP: advertisedHTTP(cfg.HTTP)}
	self.Rack, _ = cfg.Get("broker.rack")
	for _, l := range adv {
		host, portStr, err := net.SplitHostPort(l.Addr)
		if err != nil {
			return metadata.Broker{}, fmt.Errorf("listener %s address %q: %w", l.Name, l.Addr, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port <= 0 || port > 65535 {
			return metadata.Broker{}, fmt.Errorf("listener %s address %q: bad port", l.Name, l.Addr)
		}
		e := metadata.Endpoint{Name: l.Name, Host: dialHost(host), Port: int32(port), Protocol: l.Protocol}
		self.Endpoints = append(self.Endpoints, e)
		if l.Name == inter {
			self.Host, self.Port = e.Host, e.Port
		}
	}
	return self, nil
}

// dialHost is the host other nodes dial for a listener bound to host: a
// wildcard or empty host becomes the machine's first non-loopback IPv4
// address.
func dialHost(host string) string {
	if host == "" || host == "0.0.0.0" || host == "::" {
		return firstIPv4()
	}
	return host
}

// advertisedHTTP is the --http address as other nodes should dial it: a
// wildcard or empty host becomes the machine's first non-loopback IPv4
// address. An unparsable or empty address advertises nothing.
func advertisedHTTP(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return ""
	}
	return net.JoinHostPort(dialHost(host), port)
}

// firstIPv4 returns the first non-loopback IPv4 address of this machine.
func firstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// Open starts a broker on the configured data directory, recovering every
// local partition the metadata assigns to it.
func Open(opts Options) (*Broker, error) {
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.OnFatal == nil {
		opts.OnFatal = func(error) { os.Exit(1) }
	}
	cfg := opts.Config
	// A data directory created here must survive a crash with what is
	// synced inside it: its own name is synced too.
	if err := vfs.MkdirAllDurable(opts.FS, cfg.DataDir); err != nil {
		return nil, err
	}
	if opts.Controller == nil {
		self, err := SelfBroker(cfg)
		if err != nil {
			return nil, err
		}
		l, err := metadata.OpenLocal(opts.FS, path.Join(cfg.DataDir, "__cluster_metadata"), cfg, self, opts.NewClusterID)
		if err != nil {
			return nil, err
		}
		opts.Controller = l
	}
	inter, err := newInterBroker(cfg)
	if err != nil {
		return nil, err
	}
	// Before any partition writes: an OS FSSyncer reports the writeback
	// errors that happen while it is open.
	var syncer vfs.FSSyncer
	minSyncFS := int(cfg.Int(syncFSMinPartitions, defaultSyncFSMinPartitions))
	if minSyncFS > 0 {
		if syncer, err = vfs.SyncFSOf(opts.FS, cfg.DataDir); err != nil {
			return nil, err
		}
		if syncer == nil {
			opts.Logger.Info("syncfs not available (Linux 5.8 or later only): one fsync per partition", syncFSMinPartitions, minSyncFS)
		}
	}
	b := &Broker{cfg: cfg, fs: opts.FS, log: opts.Logger, clock: opts.Clock, ctrl: opts.Controller, onFatal: opts.OnFatal,
		parts: map[TP]*Partition{}, fetchers: map[int32]*fetcher{}, closing: make(chan struct{}), flusher: newFlusher(opts.Steps, syncer, cfg.DataDir, minSyncFS), inter: inter, transport: opts.Transport,
		steps: opts.Steps, checkWriters: opts.CheckWriters, joinCluster: opts.JoinCluster, applied: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.bgIdle = sync.NewCond(&b.bgMu)
	b.leaderQuota = newReplQuota(cfg, b.clock, "leader", "leader.replication.throttled.rate")
	b.followerQuota = newReplQuota(cfg, b.clock, "follower", "follower.replication.throttled.rate")
	if opts.Knobs != nil {
		b.knobs = *opts.Knobs
	}
	if b.transport == nil {
		b.transport = tcpTransport{inter}
	}
	b.rand = opts.Rand
	if b.rand == nil {
		b.rand = crand.Reader
	}
	if opts.RemoteStore != nil {
		b.rlm = newRLM(b, opts.RemoteStore)
	}
	b.startRemote(opts)
	b.hwCheck = b.readHWCheckpoint()
	if err := b.reconcile(b.ctrl.Image()); err != nil {
		b.Close()
		return nil, err
	}
	b.ctrl.Watch(func(im *metadata.Image) {
		err := b.reconcile(im)
		var refused *clusterRefusedError
		switch {
		case errors.As(err, &refused):
			b.log.Error("the data directory belongs to another cluster: halting", "err", err)
			b.onFatal(err)
		case err != nil:
			b.log.Error("applying metadata", "offset", im.Offset, "err", err)
		}
	})
	if !b.steps {
		b.wg.Add(2)
		go b.tickLoop()
		go b.retentionLoop()
		b.startCleaner()
		if b.rlm != nil {
			b.wg.Add(1)
			go b.rlmLoop()
		}
	}
	return b, nil
}

// Config returns the broker configuration.
func (b *Broker) Config() *config.Broker { return b.cfg }

// NodeID is this node's id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// Controller is the metadata authority this broker follows.
func (b *Broker) Controller() metadata.Controller { return b.ctrl }

// Image returns the current metadata image (read-only).
func (b *Broker) Image() *metadata.Image { return b.ctrl.Image() }

// Applied is closed once the broker has applied an image that holds this
// incarnation's registration: the partitions it names are open and its
// topic ids resolve, so the broker answers requests as its Metadata
// describes (Kafka's broker enables request processing after its
// initial metadata catch-up, BrokerServer.startup).
func (b *Broker) Applied() <-chan struct{} { return b.applied }

// CaughtUp reports whether this node acts on its metadata: the image holds
// this incarnation's registration (a node replaying its metadata log after a
// restart, or cut off from the quorum before registering, is not). Until
// then its image may be stale or empty, so it must not tell a client that
// a topic does not exist.
func (b *Broker) CaughtUp() bool { return b.caughtUp.Load() }

// Now is the broker's clock.
func (b *Broker) Now() time.Time { return b.clock.Now() }

// Clock returns the broker's time source.
func (b *Broker) Clock() clock.Clock { return b.clock }

// now is b.clock.Now().
func (b *Broker) now() time.Time { return b.clock.Now() }

// Logger is the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

// OnLeadershipChange registers fn, called (from the metadata goroutine)
// whenever this node gains or loses leadership of a partition.
func (b *Broker) OnLeadershipChange(fn func(tp TP, isLeader bool, leaderEpoch int32)) {
	b.applyMu.Lock()
	b.listeners = append(b.listeners, fn)
	b.applyMu.Unlock()
}

// context returns a context bounded by d and cancelled when the broker
// closes.
func (b *Broker) context(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, d)
}

// goBackground runs fn on a goroutine Close waits for, and reports whether
// it did: it refuses once Close has stopped the metadata reconciliation.
func (b *Broker) goBackground(fn func()) bool {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	if b.bgClosed {
		return false
	}
	b.bgN++
	go func() {
		defer func() {
			b.bgMu.Lock()
			if b.bgN--; b.bgN == 0 {
				b.bgIdle.Broadcast()
			}
			b.bgMu.Unlock()
		}()
		fn()
	}()
	return true
}

// waitBackground waits until no goroutine of goBackground runs; with
// final set, none starts after.
func (b *Broker) waitBackground(final bool) {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	b.bgClosed = b.bgClosed || final
	for b.bgN > 0 {
		b.bgIdle.Wait()
	}
}

func partitionDir(dataDir string, tp TP) string {
	return path.Join(dataDir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
}

// storageConfig maps a topic's effective config onto the storage config.
func (b *Broker) storageConfig(t *metadata.Topic) storage.Config {
	tc := b.TopicConfig(t)
	c := storage.DefaultConfig()
	c.SegmentBytes = tc.Int64("segment.bytes")
	c.SegmentMs = tc.Int64("segment.ms")
	c.IndexIntervalBytes = int(tc.Int64("index.interval.bytes"))
	c.SegmentIndexBytes = int(tc.Int64("segment.index.bytes"))
	c.Delete, c.Compact = tc.CleanupPolicy()
	c.RetentionMs = tc.Int64("retention.ms")
	c.DeleteRetentionMs = tc.Int64("delete.retention.ms")
	c.MinCompactionLagMs = tc.Int64("min.compaction.lag.ms")
	c.MaxCompactionLagMs = tc.Int64("max.compaction.lag.ms")
	c.MinCleanableDirtyRatio = tc.Float64("min.cleanable.dirty.ratio")
	c.RetentionBytes = tc.Int64("retention.bytes")
	c.FileDeleteDelayMs = tc.Int64("file.delete.delay.ms")
	// Tiered storage (KIP-405): local.retention.* of -2 follow retention.*
	// (Kafka's LogConfig.localRetentionMs / localRetentionBytes).
	c.RemoteStorage = tc.Bool("remote.storage.enable")
	c.RemoteCopyDisable = tc.Bool("remote.log.copy.disable")
	c.LocalRetentionMs, c.LocalRetentionBytes = tc.Int64("local.retention.ms"), tc.Int64("local.retention.bytes")
	if c.LocalRetentionMs == -2 {
		c.LocalRetentionMs = c.RetentionMs
	}
	if c.LocalRetentionBytes == -2 {
		c.LocalRetentionBytes = c.RetentionBytes
	}
	c.ProducerIDExpirationMs = b.cfg.Int("producer.id.expiration.ms", 86400000)
	return c
}

// TopicConfig returns the effective configuration of a topic.
func (b *Broker) TopicConfig(t *metadata.Topic) config.TopicConfig {
	return config.TopicConfig{Set: t.Configs, Broker: b.cfg}
}

// MinISR is a topic's effective min.insync.replicas.
func (b *Broker) MinISR(t *metadata.Topic) int {
	return int(b.TopicConfig(t).Int64("min.insync.replicas"))
}

// partitionState converts the controller's view of a partition into the
// replica machine's input, with broker epochs and eligibility (KIP-841,
// KIP-903).
func partitionState(im *metadata.Image, mp *metadata.Partition) replica.PartitionState {
	ps := replica.PartitionState{Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch, PartitionEpoch: mp.PartitionEpoch,
		Replicas: mp.Replicas, ISR: mp.ISR, ELR: mp.ELR, BrokerEpochs: make([]int64, len(mp.Replicas))}
	for i, id := range mp.Replicas {
		br, ok := im.Brokers[id]
		if !ok {
			ps.BrokerEpochs[i] = -1
			ps.Ineligible = append(ps.Ineligible, id)
			continue
		}
		ps.BrokerEpochs[i] = br.Epoch
		if !br.Active() {
			ps.Ineligible = append(ps.Ineligible, id)
		}
	}
	return ps
}

// reconcile makes the local replicas match a committed image: open logs of
// newly assigned partitions, apply leader/ISR changes to each replica
// machine, move follower fetchers, delete partitions no longer assigned.
func (b *Broker) reconcile(im *metadata.Image) error {
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	select {
	case <-b.closing:
		return nil
	default:
	}
	b.mu.RLock()
	prev := b.img
	b.mu.RUnlock()
	if prev != nil && im.Offset < prev.Offset {
		return nil
	}
	if b.joinCluster != nil && im.ClusterID != b.joined {
		if im.ClusterID == "" {
			return nil
		}
		if err := b.joinCluster(im.ClusterID); err != nil {
			return &clusterRefusedError{err}
		}
		b.joined = im.ClusterID
	}
	self := b.cfg.NodeID
	// Dynamic broker configs (KIP-226) first: the partitions below are
	// applied with the topic defaults they give.
	dynChanged := b.cfg.SetDynamic(im.BrokerConfigs[""], im.BrokerConfigs[strconv.Itoa(int(self))])
	if dynChanged {
		b.applyDynamic()
	}
	if !b.caughtUp.Load() && !b.knobs.ActOnReplayedMetadata {
		br, ok := im.Brokers[self]
		if epoch := b.ctrl.BrokerEpoch(); !ok || epoch < 0 || br.Epoch != epoch {
			return nil
		}
		b.caughtUp.Store(true)
		if err := b.setAsideStrays(im); err != nil {
			b.logDirFailed(nil, "set aside stray partition directories", err)
			return err
		}
	}
	want := map[TP]bool{}
	var errs []error
	type leadChange struct {
		tp     TP
		leader bool
		epoch  int32
	}
	var changes []leadChange
	// One summary line per metadata change instead of one per partition
	// (a restart opens every partition at once): the per-partition lines
	// are DEBUG.
	var epochChanges, leading int
	// A replica of a topic since deleted and recreated under the same
	// name (both between the previous image and this one) goes first:
	// its log is removed and the new topic's opened in its place.
	for _, p := range b.replaced(im) {
		b.unassignFetcher(p)
		if p.IsLeader() {
			changes = append(changes, leadChange{p.TP, false, p.LeaderEpoch()})
			b.deleteRemoteLog(im, p)
		}
		if err := p.close(true); err != nil {
			b.log.Warn("deleting a replaced topic's partition data", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
	}
	logs, openErrs := b.openLogs(im)
	errs = append(errs, openErrs...)
	// Partitions whose metadata did not change since the image applied
	// last are left alone: with tens of thousands of partitions, every ISR
	// change would otherwise touch them all.
	// A change of the dynamic broker configs may change every topic's
	// effective config (a dynamic log.retention.ms, min.insync.replicas):
	// every partition is applied again.
	sameBrokers := prev != nil && brokersEqual(prev, im) && !dynChanged
	type apply struct {
		p                 *Partition
		t                 *metadata.Topic
		mp                *metadata.Partition
		wasLeader, isLead bool
		oldEpoch, epoch   int32
	}
	var applies []apply
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		var pt *metadata.Topic
		if sameBrokers {
			if pt = prev.Topics[name]; pt != nil && (pt.ID != t.ID || !maps.Equal(pt.Configs, t.Configs)) {
				pt = nil
			}
		}
		for i := range t.Partitions {
			mp := &t.Partitions[i]
			if !mp.HasReplica(self) {
				continue
			}
			tp := TP{name, mp.Index}
			want[tp] = true
			b.mu.RLock()
			p := b.parts[tp]
			b.mu.RUnlock()
			if p == nil {
				l := logs[tp]
				if l == nil {
					continue // not opened (openLogs said why)
				}
				p = newPartition(b, tp, l, b.MinISR(t))
				p.topicID = t.ID
				b.mu.Lock()
				p.tickSlot = uint8(len(b.parts) % idleTickEvery)
				b.parts[tp] = p
				b.partList = nil
				b.mu.Unlock()
			} else if pt != nil && int(mp.Index) < len(pt.Partitions) && samePartition(&pt.Partitions[mp.Index], mp) {
				continue
			} else {
				// The owner is the log's one writer, its settings
				// included.
				cfg := b.storageConfig(t)
				p.do(func() { p.log.SetConfig(cfg) })
			}
			applies = append(applies, apply{p: p, t: t, mp: mp})
		}
	}
	// Applying a state may write a leader-epoch checkpoint (two fsyncs):
	// partitions are applied in parallel, as they are opened.
	b.parallel(len(applies), func(i int) {
		a := &applies[i]
		a.wasLeader, a.oldEpoch = a.p.IsLeader(), a.p.LeaderEpoch()
		a.p.applyState(partitionState(im, a.mp), b.MinISR(a.t))
		a.isLead, a.epoch = a.p.IsLeader(), a.p.LeaderEpoch()
	})
	for _, a := range applies {
		p, mp, name := a.p, a.mp, a.p.Topic
		if mp.LeaderEpoch > a.oldEpoch && a.oldEpoch >= 0 {
			metrics.LeaderElections.Inc()
		}
		if pt := prevPartition(prev, name, mp.Index); pt != nil && mp.Leader == self && pt.LeaderEpoch == mp.LeaderEpoch {
			switch {
			case len(mp.ISR) < len(pt.ISR):
				metrics.ISRShrinks.Inc()
			case len(mp.ISR) > len(pt.ISR):
				metrics.ISRExpands.Inc()
			}
		}
		if a.isLead != a.wasLeader || (a.isLead && a.epoch != a.oldEpoch) {
			changes = append(changes, leadChange{p.TP, a.isLead, a.epoch})
		}
		if a.epoch != a.oldEpoch {
			epochChanges++
			if mp.Leader == self {
				leading++
			}
			b.log.Debug("partition leadership", "topic", name, "partition", mp.Index, "leader", mp.Leader,
				"epoch", mp.LeaderEpoch, "isr", mp.ISR, "leo", p.LogEndOffset(), "hw", p.HighWatermark())
		}
		b.assignFetcher(p, im)
	}
	if epochChanges > 0 {
		b.log.Info("partition leadership changed", "partitions", epochChanges, "now_leader_of", leading, "metadata_offset", im.Offset)
	}
	b.mu.Lock()
	var gone []*Partition
	for tp, p := range b.parts {
		if !want[tp] {
			delete(b.parts, tp)
			b.partList = nil
			gone = append(gone, p)
		}
	}
	b.img = im
	b.topicIDs = make(map[metadata.UUID]string, len(im.Topics))
	for name, t := range im.Topics {
		b.topicIDs[t.ID] = name
	}
	b.mu.Unlock()
	if b.caughtUp.Load() {
		b.appliedOnce.Do(func() { close(b.applied) })
	}
	for _, p := range gone {
		b.unassignFetcher(p)
		if p.IsLeader() {
			changes = append(changes, leadChange{p.TP, false, p.LeaderEpoch()})
			b.deleteRemoteLog(im, p)
		}
		if err := p.close(true); err != nil {
			b.log.Warn("deleting partition data", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
	}
	for _, c := range changes {
		for _, fn := range b.listeners {
			fn(c.tp, c.leader, c.epoch)
		}
	}
	return errors.Join(errs...)
}

// clusterRefusedError is reconcile's error for an image of a cluster the
// data directory does not belong to (Options.JoinCluster).
type clusterRefusedError struct{ err error }

func (e *clusterRefusedError) Error() string { return e.err.Error() }
func (e *clusterRefusedError) Unwrap() error { return e.err }

// metadataLag bounds how long a request for a partition this node does not
// serve (yet) waits for metadata to arrive: a topic or leadership just
// committed by the controller reaches each broker a few milliseconds later,
// and a client that learned of it from a faster broker should not get an
// error (franz-go, for one, then waits 5 s before refreshing metadata).
const metadataLag = 300 * time.Millisecond

// prevPartition finds a partition in an earlier image (nil if none).
func prevPartition(im *metadata.Image, topic string, p int32) *metadata.Partition {
	if im == nil {
		return nil
	}
	t := im.Topics[topic]
	if t == nil || int(p) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[p]
}

// Partition returns the local replica of a partition, or the Kafka error
// for why it cannot be served.
func (b *Broker) Partition(topic string, partition int32) (*Partition, error) {
	return b.local(topic, partition, false, b.now().Add(metadataLag))
}

// Leader returns the local replica of a partition if this node leads it,
// else NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) Leader(topic string, partition int32) (*Partition, error) {
	return b.local(topic, partition, true, b.now().Add(metadataLag))
}

// LookupDeadline is the deadline a request naming many partitions passes
// to PartitionBy and LeaderBy: the metadata lag is waited for once per
// request, not once per partition (a fetch of 1,000 partitions of a
// deleted topic must not take 1,000 waits).
func (b *Broker) LookupDeadline() time.Time { return b.now().Add(metadataLag) }

// PartitionBy is Partition waiting for lagging metadata until deadline at
// most.
func (b *Broker) PartitionBy(topic string, partition int32, deadline time.Time) (*Partition, error) {
	return b.local(topic, partition, false, deadline)
}

// LeaderBy is Leader waiting for lagging metadata until deadline at most.
func (b *Broker) LeaderBy(topic string, partition int32, deadline time.Time) (*Partition, error) {
	return b.local(topic, partition, true, deadline)
}

func (b *Broker) local(topic string, partition int32, leader bool, deadline time.Time) (*Partition, error) {
	for {
		b.mu.RLock()
		p := b.parts[TP{topic, partition}]
		b.mu.RUnlock()
		if p != nil && (!leader || p.IsLeader()) {
			return p, nil
		}
		// Wait only if the metadata may be behind: the topic is unknown
		// here, or it names this node as leader and the replica has not
		// caught up with that yet. Another leader: answer at once.
		err := error(kerr.UnknownTopicOrPartition)
		if !b.caughtUp.Load() {
			// Not caught up with the metadata log (a restart still
			// replaying, or cut off from the quorum): this node cannot
			// say a topic does not exist. Kafka serves nothing until
			// caught up; a retriable error sends the client elsewhere.
			err = kerr.NotLeaderForPartition
		}
		if t, ok := b.Image().Topics[topic]; ok {
			if partition < 0 || int(partition) >= len(t.Partitions) {
				return nil, err
			}
			err = kerr.NotLeaderForPartition
			if t.Partitions[partition].Leader != b.cfg.NodeID {
				return nil, err
			}
		}
		// A broker in step mode never waits: nothing advances its clock
		// while its stepper is blocked here.
		if b.steps || b.now().After(deadline) {
			return nil, err
		}
		select {
		case <-b.closing:
			return nil, err
		case <-clock.After(b.clock, 5*time.Millisecond):
		}
	}
}

// TopicName resolves a topic id (KIP-516) through the metadata this node
// has applied, the image its partitions follow: a topic id the local
// replicas do not belong to (a deleted topic, or one recreated under the
// same name and not applied here yet) does not resolve.
func (b *Broker) TopicName(id metadata.UUID) (string, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	name, ok := b.topicIDs[id]
	return name, ok
}

// TopicID returns the id of a topic in the metadata this node has applied.
func (b *Broker) TopicID(name string) (metadata.UUID, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.img == nil {
		return metadata.UUID{}, false
	}
	t, ok := b.img.Topics[name]
	if !ok {
		return metadata.UUID{}, false
	}
	return t.ID, true
}

// idleTickEvery is how many tick rounds (100 ms each) an idle partition
// waits between ticks: nothing in an idle partition expires sooner than
// replica.lag.time.max.ms/2, and a broker with tens of thousands of
// partitions should not touch each of them ten times a second.
const idleTickEvery = 10

// partitionList returns every local replica from a cached slice (read
// only; rebuilt after the set changes).
func (b *Broker) partitionList() []*Partition {
	b.mu.RLock()
	l := b.partList
	b.mu.RUnlock()
	if l != nil {
		return l
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.partList == nil {
		b.partList = make([]*Partition, 0, len(b.parts))
		for _, p := range b.parts {
			b.partList = append(b.partList, p)
		}
		sortPartitions(b.partList)
	}
	return b.partList
}

// sortPartitions orders by topic, then partition: every loop over the
// partitions runs in the same order each time (a replayed simulation seed
// does the same thing).
func sortPartitions(ps []*Partition) {
	slices.SortFunc(ps, func(a, b *Partition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
}

// Partitions returns every local replica.
func (b *Broker) Partitions() []*Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*Partition, 0, len(b.parts))
	for _, p := range b.parts {
		out = append(out, p)
	}
	sortPartitions(out)
	return out
}

// ValidateTopicName applies Kafka's topic name rules.
func ValidateTopicName(name string) error { return metadata.ValidateTopicName(name) }

// adminTimeout bounds administrative calls to the controller.
const adminTimeout = 30 * time.Second

// CreateTopic creates a topic through the controller and waits until this
// node has applied it. See metadata.Controller.CreateTopic.
func (b *Broker) CreateTopic(name string, partitions int32, replicationFactor int16, configs map[string]string, validateOnly bool) error {
	return b.CreateTopicAssigned(name, partitions, replicationFactor, nil, configs, validateOnly)
}

// CreateTopicAssigned is CreateTopic with an explicit replica assignment.
func (b *Broker) CreateTopicAssigned(name string, partitions int32, replicationFactor int16, assignment [][]int32, configs map[string]string, validateOnly bool) error {
	if partitions == 0 || partitions < -1 {
		return kerr.InvalidPartitions
	}
	if replicationFactor == 0 || replicationFactor < -1 {
		return kerr.InvalidReplicationFactor
	}
	ctx, cancel := b.context(adminTimeout)
	defer cancel()
	if err := b.ctrl.CreateTopic(ctx, name, partitions, replicationFactor, assignment, configs, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		b.waitApplied(ctx, func(im *metadata.Image) bool { _, ok := im.Topics[name]; return ok })
	}
	return nil
}

// waitApplied waits until the reconciled image satisfies cond.
func (b *Broker) waitApplied(ctx context.Context, cond func(*metadata.Image) bool) {
	for {
		b.mu.RLock()
		im := b.img
		b.mu.RUnlock()
		if im != nil && cond(im) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(b.clock, 5*time.Millisecond):
		}
	}
}

// DeleteTopic deletes a topic and, once applied, its local data.
func (b *Broker) DeleteTopic(name string) error {
	ctx, cancel := b.context(adminTimeout)
	defer cancel()
	if err := b.ctrl.DeleteTopic(ctx, name); err != nil {
		return err
	}
	b.waitApplied(ctx, func(im *metadata.Image) bool { _, ok := im.Topics[name]; return !ok })
	return nil
}

// CreatePartitions grows a topic to count partitions, placed by the
// controller or, with a non-nil assignment, on the replicas it gives each
// new partition (metadata.Controller.CreatePartitions).
func (b *Broker) CreatePartitions(name string, count int32, assignment [][]int32, validateOnly bool) error {
	ctx, cancel := b.context(adminTimeout)
	defer cancel()
	if err := b.ctrl.CreatePartitions(ctx, name, count, assignment, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		b.waitApplied(ctx, func(im *metadata.Image) bool {
			t, ok := im.Topics[name]
			return ok && int32(len(t.Partitions)) >= count
		})
	}
	return nil
}

// applyDynamic reads the dynamically changeable settings the broker
// keeps again, after the dynamic broker configs changed (reconcile, with
// applyMu held): the replication throttles, the cleaner's settings, and
// the hooks of OnDynamicConfig.
func (b *Broker) applyDynamic() {
	cluster, own := b.cfg.Dynamic()
	b.log.Info("dynamic broker configs", "cluster", sortedKeys(cluster), "broker", sortedKeys(own))
	b.leaderQuota.setRate(b.cfg)
	b.followerQuota.setRate(b.cfg)
	if c := b.cleaner.Load(); c != nil {
		c.reconfigure()
	}
	for _, fn := range b.configHooks {
		fn()
	}
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// OnDynamicConfig registers fn to be called after the dynamic broker
// configs in effect changed (Config's values then include them), with the
// broker's metadata application paused: fn must be quick and must not
// call into the Broker. The server's connection limits are applied so.
func (b *Broker) OnDynamicConfig(fn func()) {
	b.applyMu.Lock()
	b.configHooks = append(b.configHooks, fn)
	b.applyMu.Unlock()
}

// AlterResourceConfigs changes the dynamic configs of a BROKER resource
// (KIP-226) or a GROUP resource (KIP-848) through the controller, and
// waits until this broker applied the change. With replace set (legacy
// AlterConfigs) the SET ops are the resource's whole new set.
func (b *Broker) AlterResourceConfigs(r metadata.ConfigResource, ops []ConfigOp, replace, validateOnly bool) error {
	ra, ok := b.ctrl.(metadata.ResourceConfigAlterer)
	if !ok {
		return fmt.Errorf("%w: this controller stores no broker or group configs", kerr.InvalidRequest)
	}
	ctx, cancel := b.context(adminTimeout)
	defer cancel()
	off := b.Image().Offset
	if err := ra.AlterResourceConfigs(ctx, r, ops, replace, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		b.waitApplied(ctx, func(im *metadata.Image) bool { return im.Offset > off })
	}
	return nil
}

// ConfigOp is one change to a topic config (IncrementalAlterConfigs).
type ConfigOp = metadata.ConfigOp

// AlterTopicConfigs changes a topic's configs. With replace set (legacy
// AlterConfigs) the ops' SET values replace every explicitly set config.
func (b *Broker) AlterTopicConfigs(name string, ops []ConfigOp, replace, validateOnly bool) error {
	t, ok := b.Image().Topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	if replace {
		listed := map[string]bool{}
		for _, op := range ops {
			listed[op.Name] = true
		}
		for k := range t.Configs {
			if !listed[k] {
				ops = append(ops, ConfigOp{Name: k, Op: 1})
			}
		}
	}
	ctx, cancel := b.context(adminTimeout)
	defer cancel()
	off := b.Image().Offset
	if err := b.ctrl.AlterTopicConfigs(ctx, name, ops, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		b.waitApplied(ctx, func(im *metadata.Image) bool { return im.Offset > off })
	}
	return nil
}

// AllocateProducerID hands out a new producer id (InitProducerId).
func (b *Broker) AllocateProducerID() (int64, error) {
	ctx, cancel := b.context(adminTimeout)
	defer cancel()
	return b.ctrl.AllocateProducerID(ctx)
}

// tickLoop drives every replica machine's clock (ISR shrink checks,
// produce timeouts).
func (b *Broker) tickLoop() {
	defer b.wg.Done()
	t := b.clock.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	st := tickState{lastCheckpoint: b.now()}
	for {
		select {
		case <-b.closing:
			return
		case <-t.C():
		}
		b.tickOnce(&st)
	}
}

// tickState is what the tick loop carries from one tick to the next.
type tickState struct {
	lastCheckpoint, lastRetry time.Time
	round                     uint64
}

// tickOnce is one tick: reconcile if still needed, tick the busy
// partitions and every idleTickEvery-th round the idle ones, and write the
// HW checkpoint every 5 s.
func (b *Broker) tickOnce(st *tickState) {
	now := b.now()
	if !b.caughtUp.Load() || (b.retryOpen.Load() && now.Sub(st.lastRetry) >= time.Second) {
		// The image holding our registration may have been applied
		// before the registration call returned; or some partitions
		// are still to be opened (openLogs).
		st.lastRetry = now
		b.retryOpen.Store(false)
		if err := b.reconcile(b.ctrl.Image()); err != nil {
			b.log.Error("applying metadata", "err", err)
		}
	}
	st.round++
	for _, p := range b.partitionList() {
		if p.busy.Load() || uint8(st.round%idleTickEvery) == p.tickSlot {
			p.tick(now.UnixMilli())
		}
	}
	if now.Sub(st.lastCheckpoint) >= 5*time.Second {
		st.lastCheckpoint = now
		b.writeHWCheckpoint()
	}
}

// logDirFailed handles an I/O error on the data directory (a write, fsync,
// truncation or file creation that failed, which took a log offline with
// storage.ErrFailed, or a failed checkpoint write) the way Kafka handles a
// failed log dir when it was the last one online: LogDirFailureChannel
// marks the dir offline, ReplicaManager.handleLogDirFailure stops serving
// its partitions, and LogManager.handleLogDirFailure, finding no log dir
// left, logs "Shutdown broker because all log dirs in ... have failed" and
// calls Exit.halt(1): no controlled shutdown, nothing more acknowledged.
// sluice has a single log dir, so every such failure halts. Retrying is not
// an option: after a failed fsync the kernel may have dropped the dirty
// pages and a later fsync can succeed over lost data; a restart recovers
// from what is really on disk, and the other replicas take over meanwhile.
// tp is nil for a failure outside any partition.
func (b *Broker) logDirFailed(tp *TP, op string, err error) {
	if !b.dirFailed.CompareAndSwap(false, true) {
		return
	}
	attrs := []any{"dir", b.cfg.DataDir, "op", op, "err", err}
	where := ""
	if tp != nil {
		attrs = append(attrs, "topic", tp.Topic, "partition", tp.Partition)
		where = fmt.Sprintf(" of %s-%d", tp.Topic, tp.Partition)
	}
	b.log.Error("Shutdown broker because all log dirs in ["+b.cfg.DataDir+"] have failed: halting without a controlled shutdown", attrs...)
	// Every partition's machine learns it (replica.Replica.StorageFailed:
	// waiting produce requests fail, in case OnFatal returns, as in
	// tests). Posted from the background: the caller may be a partition's
	// owner. (Once the broker is closing, Close fails them itself.)
	b.goBackground(func() {
		for _, p := range b.Partitions() {
			p.post(func() { p.r.StorageFailed() })
		}
	})
	b.onFatal(fmt.Errorf("log directory %s failed (%s%s): %w", b.cfg.DataDir, op, where, err))
}

// ControlledShutdown asks the controller to move leadership away from this
// node and take it out of every ISR, then returns (docs/kafka-replication.md §4.3).
func (b *Broker) ControlledShutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return b.ctrl.ControlledShutdown(ctx)
}

// Close stops fetchers, flushes and closes every partition, and writes the
// HW checkpoint. The controller is closed by its owner.
func (b *Broker) Close() error {
	select {
	case <-b.closing:
		return nil
	default:
	}
	b.cancel()
	close(b.closing)
	b.StopRemoteStep()
	for _, p := range b.Partitions() {
		p.log.StopCleaning() // the cleaner threads' passes end early
	}
	b.wg.Wait()
	// ISR proposals end at once (ctx is cancelled), fetchers stopping in
	// the background like those below. Not under applyMu: a controller may
	// apply a proposal's result before answering it, and reconcile takes
	// applyMu (then, seeing closing, returns).
	b.waitBackground(false)
	b.closePeers()
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	b.mu.Lock()
	fetchers := b.fetchers
	b.fetchers = map[int32]*fetcher{}
	b.mu.Unlock()
	for _, f := range fetchers {
		f.stop()
	}
	// With applyMu held no reconcile runs, and none acts after: what a
	// last one started in the background (fetcher stops) ends now.
	b.waitBackground(true)
	b.writeHWCheckpoint()
	// Partitions flush and close in parallel, as they open.
	parts := b.Partitions()
	closeErrs := make([]error, len(parts))
	b.parallel(len(parts), func(i int) { closeErrs[i] = parts[i].close(false) })
	errs := slices.DeleteFunc(closeErrs, func(err error) bool { return err == nil })
	b.flusher.stop()
	b.mu.Lock()
	b.parts = map[TP]*Partition{}
	b.partList = nil
	b.mu.Unlock()
	return errors.Join(errs...)
}
