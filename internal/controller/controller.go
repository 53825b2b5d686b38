// Package controller is sluice's multi-node metadata quorum: KRaft's design
// on hashicorp/raft. The controller voters (--voters) replicate one metadata
// log; the raft leader is the active controller and makes every decision
// (placement, elections, ISR changes, fencing) as explicit records; every
// node builds its metadata.Image only from committed entries. Nodes that are
// not voters follow the committed image over a long-poll fetch RPC. Every
// node, voter or not, registers itself as a broker and heartbeats. See
// docs/controller.md.
package controller

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// Config configures a Node.
type Config struct {
	// NodeID is node.id; the node is a voter iff it is listed in Voters.
	NodeID int32
	// Voters is controller.quorum.voters. Empty, Bootstrap must name the
	// quorum.
	Voters []config.Voter
	// Bootstrap is controller.quorum.bootstrap.servers (KIP-853): the
	// controllers a node outside Voters (empty) reaches the quorum
	// through, following the active controller's address from their
	// answers. Such a node is never a voter at start: a broker only, or,
	// with a ControllerListen, a prospective voter.
	Bootstrap []string
	// ControllerListen is this voter's raft+RPC bind address; empty on a
	// broker-only node (a voter then binds its address from Voters).
	ControllerListen string
	// DataDir holds the raft state under DataDir/__raft (voters only).
	DataDir string
	// Self is this node's Kafka endpoint (ID, Host, Port, Rack), registered
	// as a broker.
	Self metadata.Broker
	// Broker gives settings by Kafka name (session timeout, defaults...).
	Broker *config.Broker
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// ServerTLS, when set, is the TLS configuration of this voter's
	// controller port (the CONTROLLER listener mapped to SSL): every
	// connection, raft's and the controller RPCs', starts with a TLS
	// handshake; with ClientAuth set to require a certificate, a peer
	// without one from the trust store gets nothing. ClientTLS is what
	// this node presents and verifies when it dials a voter (voters and
	// broker-only nodes); nil dials in plain TCP. docs/security.md.
	ServerTLS, ClientTLS *tls.Config

	// RaftTimeout is raft's heartbeat and election timeout. Default 1s.
	RaftTimeout time.Duration
	// SnapshotThreshold is the number of log entries between snapshots.
	// Default 1024.
	SnapshotThreshold uint64

	// DirectoryKept is set when the data directory's meta.properties
	// predates this start (the directory is not new). Without a broker
	// epoch file (brokerEpochFile) such a directory was written by an
	// earlier binary, which kept none: its registration sends
	// PreviousEpochKept instead of -1, and is not unclean for lack of the
	// file (a wiped directory has no meta.properties either).
	DirectoryKept bool
	// Standalone is set when the quorum of one in Voters was not given
	// but implied: a node started without --voters is a quorum of itself
	// (Kafka 4's kafka-storage.sh format --standalone). Its metadata log
	// must then say the same: a log whose configuration has other
	// members (a quorum member's directory started without --voters) is
	// refused at start, and when the node's controller address changed
	// since the log was written (an ephemeral loopback listener), the
	// active controller records the new one.
	Standalone bool
	// Listener, when set, is this voter's controller port, already bound
	// (ControllerListen is then ignored for the bind).
	Listener net.Listener
	// Import, when set, is the image of the single-node metadata store an
	// earlier binary wrote (metadata.Store). A new quorum (no cluster id
	// committed yet) starts from it instead of an empty cluster: its
	// first active controller commits it as one record (import.go).
	Import *metadata.Image
	// ClusterID, when set, is the id a new quorum takes (a data
	// directory formatted with `sluice storage format --cluster-id`);
	// unset, the first active controller picks a random one.
	ClusterID string

	// MaxBrokerPartitions and MaxPartitions are KIP-578's
	// max.broker.partitions and max.partitions, which CreateTopics and
	// CreatePartitions respect. Zero takes them from Broker.
	MaxBrokerPartitions int
	MaxPartitions       int
}

// Node is one member of a multi-node cluster: a broker's controller client
// and, on a voter, a raft quorum member that may be the active controller.
// It implements metadata.Controller.
type Node struct {
	cfg      Config
	log      *slog.Logger
	voter    bool // runs raft: listed in --voters, or prospective
	raftAddr string
	// prospective: not in --voters but given a controller listener; it
	// runs raft unbootstrapped and becomes a voter through AddRaftVoter.
	prospective bool
	st          *imageState
	cli         *client
	incarnate   string
	// prevEpoch is the broker epoch the data directory recorded last
	// (epochfile.go), -1 if none; only the registration loop uses it.
	prevEpoch int64

	// voter only
	raft     *raft.Raft
	guard    *guardedTransport // the raft transport, refusing votes while the voter catches up
	store    *boltStore
	mux      *mux
	notifyCh chan bool
	raftDone chan struct{}
	// raftReady is closed once n.raft is set; RPCs that arrive earlier
	// (the listener opens first) wait for it.
	raftReady chan struct{}
	act       active

	baseCtx  context.Context
	cancel   context.CancelFunc
	closing  chan struct{}
	closeMu  sync.Once
	wg       sync.WaitGroup
	epoch    atomic.Int64
	wantDown atomic.Bool
	// lastContact is when (UnixNano) an active controller last answered
	// this node's registration or heartbeat; 0 before the first answer.
	lastContact atomic.Int64
	poke        chan struct{}
	// leaderProbe is set while a probe of the raft leader's controller
	// port is out (leaderloss.go).
	leaderProbe atomic.Bool
	// hurried counts the elections this voter hurried (leaderloss.go).
	hurried atomic.Int64
	granted chan struct{}
	grantMu sync.Once

	stats  statsCounter
	alters alterBatcher

	pidMu   sync.Mutex
	pidNext int64
	pidEnd  int64
}

var _ metadata.Controller = (*Node)(nil)

// Start starts the node: on a voter it opens the raft state, bootstraps the
// quorum from Voters on first start and serves the controller port; on every
// node it starts registering and heartbeating as a broker in the background
// (BrokerEpoch is -1 until registered; see WaitReady).
func Start(cfg Config) (*Node, error) {
	if len(cfg.Voters) == 0 && len(cfg.Bootstrap) == 0 {
		return nil, errors.New("controller: no voters and no bootstrap servers")
	}
	if cfg.Broker == nil {
		cfg.Broker = config.Defaults()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RaftTimeout <= 0 {
		cfg.RaftTimeout = time.Second
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 1024
	}
	lim := metadata.LimitsOf(cfg.Broker)
	if cfg.MaxBrokerPartitions <= 0 {
		cfg.MaxBrokerPartitions = lim.MaxBrokerPartitions
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = lim.MaxPartitions
	}
	cfg.Self.ID = cfg.NodeID
	cfg.Self.Features = metadata.SupportedFeatures()
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("component", "controller", "node", cfg.NodeID),
		st: newImageState(), incarnate: metadata.NewUUID().String(), prevEpoch: previousEpoch(cfg.DataDir, cfg.DirectoryKept),
		closing: make(chan struct{}), poke: make(chan struct{}, 1), granted: make(chan struct{}),
		raftDone: make(chan struct{}), raftReady: make(chan struct{}),
	}
	n.epoch.Store(-1)
	n.baseCtx, n.cancel = context.WithCancel(context.Background())
	addrs := append([]string(nil), cfg.Bootstrap...)
	for _, v := range cfg.Voters {
		addrs = append(addrs, v.Addr)
		if v.ID == cfg.NodeID {
			n.voter, n.raftAddr = true, v.Addr
		}
	}
	if !n.voter && cfg.ControllerListen != "" {
		// A prospective voter (KIP-853): it runs raft without
		// bootstrapping and follows the metadata as a broker until
		// AddRaftVoter makes it a member (voters.go).
		n.voter, n.raftAddr, n.prospective = true, cfg.ControllerListen, true
		n.log.Info("not in --voters but has a controller listener: runs raft as a prospective voter, to be added with AddRaftVoter", "addr", cfg.ControllerListen)
	}
	n.cli = &client{voters: addrs, idle: map[string][]net.Conn{}, tls: cfg.ClientTLS}
	if n.voter {
		if err := n.startRaft(); err != nil {
			n.cancel()
			n.st.close()
			return nil, err
		}
		n.cli.self, n.cli.local = n.raftAddr, n.serveLocal
		// Outside the raft configuration (not yet added, or removed)
		// the node follows the metadata as a broker-only node does.
		n.wg.Add(1)
		go n.followLoop()
	} else {
		n.wg.Add(1)
		go n.fetchLoop()
	}
	n.wg.Add(1)
	go n.brokerLoop()
	return n, nil
}

func (n *Node) startRaft() error {
	dir := filepath.Join(n.cfg.DataDir, "__raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var err error
	ln := n.cfg.Listener
	if ln == nil {
		bind := n.cfg.ControllerListen
		if bind == "" {
			bind = n.raftAddr
		}
		if ln, err = net.Listen("tcp", bind); err != nil {
			return fmt.Errorf("controller: listen %s: %w", bind, err)
		}
	}
	n.act.init(n)
	n.act.probe = dialProbe
	n.wg.Add(1)
	go n.act.decisionLoop()
	n.mux = newMux(ln, n.serveConn, n.raftConnEnded, n.cfg.ServerTLS, n.log)
	hlog := newRaftLogger(n.log)
	stream := &streamLayer{m: n.mux, addr: raftAddr(n.raftAddr), tls: n.cfg.ClientTLS, done: make(chan struct{})}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream, MaxPool: 3, Timeout: 5 * time.Second, Logger: hlog})
	var guard *guardedTransport
	fail := func(err error) error {
		if guard != nil {
			guard.Close()
		}
		trans.Close()
		n.mux.close()
		if n.store != nil {
			n.store.Close()
		}
		return err
	}
	if n.cfg.Standalone {
		if err := n.checkStandalone(dir, hlog); err != nil {
			return fail(err)
		}
	}
	n.store, err = openBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return fail(err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return fail(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(n.cfg.NodeID)))
	rc.HeartbeatTimeout = n.cfg.RaftTimeout
	rc.ElectionTimeout = n.cfg.RaftTimeout
	rc.LeaderLeaseTimeout = n.cfg.RaftTimeout / 2
	rc.CommitTimeout = 20 * time.Millisecond
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.SnapshotInterval = 30 * time.Second
	rc.TrailingLogs = n.cfg.SnapshotThreshold
	rc.Logger = hlog
	n.notifyCh = make(chan bool, 16)
	rc.NotifyCh = n.notifyCh
	has, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		return fail(err)
	}
	// A voter without its raft state, or whose earlier such start had not
	// caught up, does not vote until it has (voteguard.go).
	_, statErr := os.Stat(filepath.Join(dir, rejoinMarker))
	rejoining := statErr == nil
	guarded := (!has || rejoining) && (len(n.cfg.Voters) > 1 || n.prospective)
	if guarded && !rejoining {
		if err := writeRejoinMarker(dir); err != nil {
			return fail(err)
		}
	}
	guard = newGuardedTransport(trans, rc.LocalID, guarded)
	n.guard = guard
	if guarded {
		n.log.Info("controller voter starts without voting until it has caught up (no metadata log, or an unfinished rejoin)", "had.state", has)
	}
	if !has && !n.prospective {
		var servers []raft.Server
		for _, v := range n.cfg.Voters {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.ID))), Address: raft.ServerAddress(v.Addr)})
		}
		err := raft.BootstrapCluster(rc, n.store, n.store, snaps, guard, raft.Configuration{Servers: servers})
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fail(err)
		}
	}
	n.raft, err = raft.NewRaft(rc, &fsm{st: n.st}, n.store, n.store, snaps, guard)
	if err == nil {
		close(n.raftReady)
	}
	if err != nil {
		return fail(err)
	}
	n.wg.Add(1)
	go n.leaderLoop()
	if guarded {
		n.wg.Add(1)
		go n.rejoin(dir)
	}
	return nil
}

// Close stops the node: leadership is handed to another voter first if this
// node is the active controller; then raft shuts down and every goroutine
// and connection of the node ends.
func (n *Node) Close() error { return n.close(false) }

// CloseNow stops the node without handing leadership over, closing its
// controller connections (raft's outgoing ones included) before raft shuts
// down, so that no RPC to an unresponsive peer (up to the transport's 5 s
// timeout) holds the exit. For a forced stop, or when no quorum is
// reachable anyway. What raft committed is on disk either way.
func (n *Node) CloseNow() error { return n.close(true) }

func (n *Node) close(now bool) error {
	n.closeMu.Do(func() {
		if !now && n.voter && n.raft.State() == raft.Leader && n.otherVoters() {
			n.raft.LeadershipTransfer().Error()
		}
		close(n.closing)
		n.cancel()
		if n.voter {
			if now {
				n.mux.close()
			}
			if err := n.raft.Shutdown().Error(); err != nil {
				n.log.Warn("raft shutdown", "err", err)
			}
			close(n.raftDone)
			n.mux.close()
		}
		n.wg.Wait()
		if n.voter {
			n.store.Close()
		}
		n.cli.close()
		n.st.close()
	})
	return nil
}

// otherVoters reports whether raft's latest configuration has a voter
// besides this node (a quorum of one grown with AddRaftVoter has, though
// its Config.Voters names only itself).
func (n *Node) otherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return len(n.cfg.Voters) > 1
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != serverID(n.cfg.NodeID) {
			return true
		}
	}
	return false
}

// limits are the partition limits this node enforces as the active
// controller.
func (n *Node) limits() metadata.Limits {
	return metadata.Limits{MaxBrokerPartitions: n.cfg.MaxBrokerPartitions, MaxPartitions: n.cfg.MaxPartitions}
}

// Image implements metadata.Controller: the latest committed image applied
// on this node.
func (n *Node) Image() *metadata.Image { return n.st.Image() }

// Watch implements metadata.Controller.
func (n *Node) Watch(fn func(*metadata.Image)) { n.st.watch(fn) }

// BrokerEpoch implements metadata.Controller.
func (n *Node) BrokerEpoch() int64 { return n.epoch.Load() }

// IsVoter reports whether this node is a controller voter.
func (n *Node) IsVoter() bool { return n.voter }

// IsActive reports whether this node is the active controller (raft leader
// past its first barrier).
func (n *Node) IsActive() bool { return n.voter && n.act.isActive() }

// Leader returns the active controller's node id and address as this node
// last learned them (-1, "" if unknown).
func (n *Node) Leader() (int32, string) {
	if n.voter {
		addr, id := n.raft.LeaderWithID()
		if addr == "" {
			return -1, ""
		}
		v, _ := strconv.Atoi(string(id))
		return int32(v), string(addr)
	}
	n.cli.mu.Lock()
	addr := n.cli.leader
	n.cli.mu.Unlock()
	for _, v := range n.cfg.Voters {
		if v.Addr == addr {
			return v.ID, addr
		}
	}
	return -1, ""
}

// Snapshot forces a raft snapshot of the metadata image (voters only), so
// the log before it can be compacted.
func (n *Node) Snapshot() error {
	if !n.voter {
		return errors.New("controller: not a voter")
	}
	return n.raft.Snapshot().Error()
}

// WaitReady waits until this node is registered and unfenced in its own
// applied image.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		im, ch := n.st.current()
		if b, ok := im.Brokers[n.cfg.NodeID]; ok && b.Epoch == n.epoch.Load() && !b.Fenced {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return net.ErrClosed
		}
	}
}

// waitApplied waits until this node's image reaches offset off.
func (n *Node) waitApplied(ctx context.Context, off int64) error {
	for {
		im, ch := n.st.current()
		if im.Offset >= off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return net.ErrClosed
		}
	}
}

// ctx derives a context that also ends when the node closes.
func (n *Node) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(n.baseCtx, cancel)
	return c, func() { stop(); cancel() }
}

// write sends a mutating op to the active controller and waits until this
// node has applied the resulting entry.
func (n *Node) write(ctx context.Context, op string, in, out any) error {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	if _, ok := ctx.Deadline(); !ok {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, defaultCallTimeout)
		defer c2()
	}
	off, err := n.cli.call(ctx, op, in, out, 0)
	if err != nil {
		return err
	}
	if off > 0 {
		return n.waitApplied(ctx, off)
	}
	return nil
}

// CreateTopic implements metadata.Controller.
func (n *Node) CreateTopic(ctx context.Context, name string, partitions int32, rf int16, assignment [][]int32, configs map[string]string, validateOnly bool) error {
	return n.write(ctx, opCreateTopic, createTopicReq{Name: name, Partitions: partitions, RF: rf, Assignment: assignment, Configs: configs, ValidateOnly: validateOnly}, nil)
}

// DeleteTopic implements metadata.Controller.
func (n *Node) DeleteTopic(ctx context.Context, name string) error {
	return n.write(ctx, opDeleteTopic, topicReq{Name: name}, nil)
}

// CreatePartitions implements metadata.Controller.
func (n *Node) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	return n.write(ctx, opCreatePartitions, createPartitionsReq{Name: name, Count: count, Assignment: assignment, ValidateOnly: validateOnly}, nil)
}

// AlterTopicConfigs implements metadata.Controller.
func (n *Node) AlterTopicConfigs(ctx context.Context, name string, ops []metadata.ConfigOp, validateOnly bool) error {
	return n.write(ctx, opAlterConfigs, topicReq{Name: name, Ops: ops, ValidateOnly: validateOnly}, nil)
}

// AlterResourceConfigs implements metadata.ResourceConfigAlterer through
// the active controller.
func (n *Node) AlterResourceConfigs(ctx context.Context, r metadata.ConfigResource, ops []metadata.ConfigOp, replace, validateOnly bool) error {
	return n.write(ctx, opAlterResConfigs, resConfigReq{Resource: r, Ops: ops, Replace: replace, ValidateOnly: validateOnly}, nil)
}

// AlterScramCredentials implements metadata.ScramAlterer through the
// active controller.
func (n *Node) AlterScramCredentials(ctx context.Context, ops []metadata.ScramOp) ([]error, error) {
	var resp scramResp
	if err := n.write(ctx, opAlterScram, scramReq{Ops: ops}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Codes) != len(ops) || len(resp.Messages) != len(ops) {
		return nil, fmt.Errorf("%w: AlterUserScramCredentials: %d results for %d changes", kerr.UnknownServerError, len(resp.Codes), len(ops))
	}
	errs := make([]error, len(ops))
	for i, c := range resp.Codes {
		if c != 0 {
			errs[i] = fmt.Errorf("%w: %s", kerr.ErrorForCode(c), resp.Messages[i])
		}
	}
	return errs, nil
}

// CreateAcls implements metadata.AclAlterer through the active
// controller.
func (n *Node) CreateAcls(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	var resp aclResp
	if err := n.write(ctx, opCreateAcls, createAclsReq{Bindings: bindings}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Codes) != len(bindings) || len(resp.Messages) != len(bindings) {
		return nil, fmt.Errorf("%w: CreateAcls: %d results for %d bindings", kerr.UnknownServerError, len(resp.Codes), len(bindings))
	}
	return codeErrors(resp.Codes, resp.Messages), nil
}

// DeleteAcls implements metadata.AclAlterer through the active
// controller.
func (n *Node) DeleteAcls(ctx context.Context, filters []acl.Filter) ([]metadata.AclDeletion, error) {
	var resp aclResp
	if err := n.write(ctx, opDeleteAcls, deleteAclsReq{Filters: filters}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Codes) != len(filters) || len(resp.Messages) != len(filters) || len(resp.Deleted) != len(filters) {
		return nil, fmt.Errorf("%w: DeleteAcls: %d results for %d filters", kerr.UnknownServerError, len(resp.Codes), len(filters))
	}
	out := make([]metadata.AclDeletion, len(filters))
	for i, err := range codeErrors(resp.Codes, resp.Messages) {
		out[i] = metadata.AclDeletion{Err: err, Deleted: resp.Deleted[i]}
	}
	return out, nil
}

// AlterClientQuotas implements metadata.QuotaAlterer through the active
// controller.
func (n *Node) AlterClientQuotas(ctx context.Context, entries []metadata.QuotaAlteration) ([]error, error) {
	var resp aclResp
	if err := n.write(ctx, opAlterQuotas, alterQuotasReq{Entries: entries}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Codes) != len(entries) || len(resp.Messages) != len(entries) {
		return nil, fmt.Errorf("%w: AlterClientQuotas: %d results for %d entries", kerr.UnknownServerError, len(resp.Codes), len(entries))
	}
	return codeErrors(resp.Codes, resp.Messages), nil
}

// codeErrors turns per-item error codes and messages into errors (nil
// for 0).
func codeErrors(codes []int16, msgs []string) []error {
	errs := make([]error, len(codes))
	for i, c := range codes {
		if c != 0 {
			errs[i] = fmt.Errorf("%w: %s", kerr.ErrorForCode(c), msgs[i])
		}
	}
	return errs
}

// AllocateProducerID implements metadata.Controller: ids come from blocks
// of producerIDBlock committed by the controller, so they never repeat
// across failovers and restarts (a restarted node takes a new block).
func (n *Node) AllocateProducerID(ctx context.Context) (int64, error) {
	n.pidMu.Lock()
	defer n.pidMu.Unlock()
	if n.pidNext < n.pidEnd {
		id := n.pidNext
		n.pidNext++
		return id, nil
	}
	var resp pidResp
	if err := n.write(ctx, opAllocatePIDs, struct{}{}, &resp); err != nil {
		return 0, err
	}
	n.pidNext, n.pidEnd = resp.Start+1, resp.Start+resp.Count
	return resp.Start, nil
}

// serveConn serves one RPC connection (after the connRPC byte). When a
// connection that carried a broker's accepted heartbeat ends, the active
// controller suspects that broker (liveness.go).
func (n *Node) serveConn(c net.Conn) {
	select {
	case <-n.raftReady:
	case <-n.closing:
		return
	}
	owner := int32(-1)
	defer func() {
		select {
		case <-n.closing:
		default:
			if owner >= 0 {
				n.act.connLost(owner)
			}
		}
	}()
	for {
		c.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		var req rpcRequest
		if err := readFrame(c, &req); err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		ctx, cancel := context.WithTimeout(n.baseCtx, defaultCallTimeout)
		resp := n.serveLocal(ctx, req)
		cancel()
		if req.Op == opHeartbeat && resp.Code == 0 {
			var hb heartbeatReq
			if json.Unmarshal(req.Body, &hb) == nil {
				owner = hb.ID
			}
		}
		if err := writeFrame(c, resp); err != nil {
			return
		}
	}
}

// serveLocal serves one request on this voter.
func (n *Node) serveLocal(ctx context.Context, req rpcRequest) rpcResponse {
	resp := n.dispatch(ctx, req)
	if resp.Leader == "" {
		_, resp.Leader = n.Leader()
	}
	return resp
}

func (n *Node) dispatch(ctx context.Context, req rpcRequest) rpcResponse {
	if req.Op == opProbe && n.voter {
		body, err := json.Marshal(n.probeState())
		if err != nil {
			return errResponse(err)
		}
		return rpcResponse{Body: body}
	}
	if req.Op == opFetch {
		var in fetchReq
		if err := json.Unmarshal(req.Body, &in); err != nil {
			return errResponse(err)
		}
		return n.serveFetch(ctx, in)
	}
	h, ok := handlers[req.Op]
	if !ok {
		return rpcResponse{Code: 35, Msg: "unsupported op " + req.Op} // UNSUPPORTED_VERSION
	}
	if !n.act.isActive() {
		return rpcResponse{Code: notController}
	}
	out, off, err := h(&n.act, ctx, req.Body)
	if err != nil {
		r := errResponse(err)
		r.Offset = off
		return r
	}
	body, err := json.Marshal(out)
	if err != nil {
		return errResponse(err)
	}
	return rpcResponse{Offset: off, Body: body}
}

// serveFetch answers a broker-only node's long poll: the committed image
// once it is newer than the caller's offset, or nothing after the wait.
func (n *Node) serveFetch(ctx context.Context, in fetchReq) rpcResponse {
	wait := min(max(time.Duration(in.MaxWaitMs)*time.Millisecond, 0), 10*time.Second)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		im, ch := n.st.current()
		if im.Offset > in.Offset {
			body, err := json.Marshal(fetchResp{Image: im})
			if err != nil {
				return errResponse(err)
			}
			return rpcResponse{Body: body}
		}
		select {
		case <-ch:
		case <-t.C:
			return rpcResponse{}
		case <-ctx.Done():
			return rpcResponse{}
		}
	}
}
