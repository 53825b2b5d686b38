// Package node assembles one sluice node from its configuration: the data
// directory's lock and identity, the controller member, the broker, the
// request handlers, the Kafka listeners, the HTTP console, the SCRAM
// bootstrap and the quorum watch; and takes it apart again, with Kafka's
// controlled shutdown first. `sluice serve` is flag parsing, signals and
// exit codes around it; in-process tests start nodes with it too.
package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/dirlock"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/security"
	"github.com/sluice-io/sluice/internal/status"
	"github.com/sluice-io/sluice/internal/vfs"
)

// standaloneCatchUp bounds how long a single node (a quorum of itself)
// waits for its first metadata to be applied before it serves clients
// anyway (a node with thousands of partitions opens them in that time).
const standaloneCatchUp = 2 * time.Minute

// catchUpWait bounds how long a node holds client requests (all but
// ApiVersions) after it starts, waiting to apply the metadata image that
// holds its own registration, before it serves them anyway (Kafka's
// broker waits for its initial catch-up, bounded by
// server.max.startup.time.ms, whose default is unbounded).
const catchUpWait = 2 * time.Minute

// holdUntilCaughtUp closes ready, which releases the client requests the
// Kafka listeners hold (protocol.Server.HoldRequests), once the broker
// has applied an image holding its registration — the controller's log
// as of the registration, Kafka's BrokerLifecycleManager
// initialCatchUpFuture — so that a restarted node never answers from the
// metadata it is still replaying (UNKNOWN_TOPIC_ID for a topic that
// exists), or after catchUpWait, or not at all once stop is closed. The
// controller member of a combined node serves the quorum meanwhile: it
// has its own listener.
func holdUntilCaughtUp(b *broker.Broker, ready chan<- struct{}, logger *slog.Logger, stop <-chan struct{}) {
	start := time.Now()
	select {
	case <-b.Applied():
		close(ready)
		return
	default:
	}
	logger.Info("holding client requests until this node has caught up with the metadata log", "max_wait", catchUpWait)
	t := time.NewTimer(catchUpWait)
	defer t.Stop()
	select {
	case <-b.Applied():
		logger.Info("caught up with the metadata log: serving client requests", "waited", time.Since(start).Round(time.Millisecond))
	case <-t.C:
		logger.Warn("serving client requests before this node caught up with the metadata log", "waited", catchUpWait)
	case <-stop:
		return
	}
	close(ready)
}

// Options is what a node takes besides its configuration.
type Options struct {
	// Logger receives every line the node writes; nil is slog.Default().
	Logger *slog.Logger
	// Version is the build version the console reports.
	Version string
	// OnFatal is called, once, when the data directory fails
	// (broker.Options.OnFatal); nil is the broker's default, os.Exit(1).
	OnFatal func(error)
	// FaultInjection wraps the data directory's filesystem with a
	// switchable disk fault driven through POST /debug/disk on the HTTP
	// listener (docs/storage.md); `serve` sets it from
	// SLUICE_FAULT_INJECTION=1.
	FaultInjection bool
}

// Node is a running node. Wait reports a failure of one of its servers;
// Close or Shutdown stops it.
type Node struct {
	cfg       *config.Broker
	log       *slog.Logger
	lock      *dirlock.Lock
	ctrl      metadata.Controller
	b         *broker.Broker
	handlers  *handler.Handlers
	srv       *protocol.Server
	bls       []boundListener
	hs        *http.Server
	httpAddr  net.Addr
	st        *status.Server
	stopWatch chan struct{}

	// errc receives the servers' errors; the first one before the
	// shutdown begins is failErr, and closes failed.
	errc        chan error
	failed      chan struct{}
	failErr     error
	closing     chan struct{}
	monitorDone chan struct{}

	closeOnce sync.Once
	done      chan struct{}
	closeErr  error
}

// Start validates what is left to validate in cfg (the HTTP port's
// security), takes the data directory, starts the controller member,
// opens the broker and serves the Kafka listeners and the HTTP port. On
// error everything it had started is stopped again.
func Start(cfg *config.Broker, o Options) (*Node, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// Kafka's AbstractConfig.logUnused: an unknown key is a warning, not
	// an error, so a Kafka user's server.properties works as it is.
	for _, k := range config.UnknownBrokerKeys(cfg.Props) {
		logger.Warn(fmt.Sprintf("The configuration '%s' was supplied but isn't a known config.", k))
	}
	// Settings sluice accepts but ignores (StatusIgnored), set to other
	// than their default: one warning names them all. The refused ones
	// (StatusRefused) stopped the start in the configuration's checks.
	if keys := config.IgnoredBrokerKeys(cfg.Props); len(keys) > 0 {
		logger.Warn("settings ignored by sluice: accepted, but they change nothing (docs/configuration.md, status ignored)", "keys", strings.Join(keys, ","))
	}
	var httpSec *httpSecurity
	var err error
	if cfg.HTTP != "" {
		if httpSec, err = httpSecurityFrom(cfg); err != nil {
			return nil, err
		}
	} else if keys := httpOnlyKeys(cfg); len(keys) > 0 {
		logger.Warn("--http port settings without --http: no effect", "keys", strings.Join(keys, ","))
	}
	// Tiered storage's object store (KIP-405): a configuration error
	// stops the start here; an unreachable store does not
	// (watchRemoteStore).
	remoteS3, err := objstore.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	var remoteStore objstore.Store
	if remoteS3 != nil {
		remoteStore = remoteS3
	}
	// The data directory is ours alone for the life of the node (Kafka's
	// .lock in every log dir): a second process on it would interleave
	// writes and skip recovery on the other's clean-shutdown marker.
	// Taken before anything reads or writes the directory; the kernel
	// drops it when the process exits.
	lock, err := dirlock.Acquire(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: logger, lock: lock}
	ok := false
	defer func() {
		if !ok {
			n.abort()
		}
	}()
	// Whose directory (node and cluster), written by which format
	// (Kafka's meta.properties): checked before anything else reads it.
	// A start that would put the directory in another cluster (a quorum
	// member's started without --voters, say) is refused here with
	// nothing changed (a voter's metadata log by the controller, read
	// before raft starts: controller.ErrNotStandalone), or, for a cluster
	// id learnt from the quorum, before the broker acts on its metadata
	// (broker.Options.JoinCluster).
	// A directory formatted with its quorum (`sluice storage format`)
	// without --voters: the formatted voters and cluster id.
	formatted, err := ApplyFormat(cfg)
	if err != nil {
		return nil, err
	}
	newClusterID := metadata.NewUUID().String()[:22]
	bootstrap, selfOnly := cfg.QuorumBootstrap()
	quorum := len(cfg.Voters) > 0 || len(bootstrap) > 0 && !selfOnly
	ident, err := metaprops.Open(cfg.DataDir, cfg.NodeID, metaprops.Start{Quorum: quorum, NewClusterID: newClusterID})
	if err != nil {
		return nil, err
	}
	var fsys vfs.FS = vfs.Default
	var disk *vfs.DiskFaults
	if o.FaultInjection {
		disk = vfs.NewDiskFaults(cfg.DataDir)
		fsys = vfs.WithFaults(vfs.Default, disk)
		logger.Warn("SLUICE_FAULT_INJECTION=1: disk faults can be injected into the data directory through POST /debug/disk on the --http listener; not for production",
			"data", cfg.DataDir, "http", cfg.HTTP)
	}
	fsys = fileCache(fsys, cfg, raiseFileLimit(logger), logger)
	formattedID := ""
	if formatted != nil {
		formattedID = formatted.ClusterID
	}
	ctrl, sa, err := startController(cfg, formattedID, ident.Props().DirectoryID, ident.Existed(), logger)
	if errors.Is(err, controller.ErrNotStandalone) {
		if id := ident.Props().ClusterID; id != "" {
			err = fmt.Errorf("%w (%s says the directory belongs to cluster %s)", err, metaprops.FileName, id)
		}
	}
	if err != nil {
		return nil, err
	}
	n.ctrl = ctrl
	b, err := broker.Open(broker.Options{Config: cfg, FS: fsys, Logger: logger, Controller: ctrl,
		NewClusterID: newClusterID, JoinCluster: ident.Join, OnFatal: o.OnFatal, RemoteStore: remoteStore})
	if err != nil {
		return nil, err
	}
	n.b = b
	if sa != nil {
		if err := finishStandalone(ctrl, cfg, sa, logger); err != nil {
			return nil, err
		}
		// A quorum of itself catches up at once: serve clients only
		// once its metadata is applied, so that what Metadata names
		// (topics, their ids, this node as leader) is what Produce and
		// Fetch find.
		select {
		case <-b.Applied():
		case <-time.After(standaloneCatchUp):
			logger.Warn("serving before this node applied its metadata", "waited", standaloneCatchUp)
		}
	}
	reg := protocol.NewRegistry()
	n.handlers = handler.RegisterWith(reg, b, handler.OptionsFromConfig(cfg))
	overrides, _ := cfg.Get("max.connections.per.ip.overrides")
	perIPOverrides, err := protocol.ParsePerIPOverrides(overrides)
	if err != nil {
		return nil, err
	}
	srv := protocol.NewServer(protocol.Config{
		MaxRequestBytes:              int32(cfg.Int("socket.request.max.bytes", 100<<20)),
		MaxConnections:               int(cfg.Int("max.connections", 10000)),
		MaxConnectionsPerIP:          int(cfg.Int("max.connections.per.ip", math.MaxInt32)),
		MaxConnectionsPerIPOverrides: perIPOverrides,
		MaxConnectionCreationRate:    float64(cfg.Int("max.connection.creation.rate", math.MaxInt32)),
		IdleTimeout:                  time.Duration(cfg.Int("connections.max.idle.ms", 600000)) * time.Millisecond,
		Logger:                       logger,
	}, reg)
	// The connection limits are dynamic broker configs (KIP-226).
	lastOverrides := overrides
	b.OnDynamicConfig(func() {
		ov, _ := cfg.Get("max.connections.per.ip.overrides")
		if ov != lastOverrides {
			// Host names are resolved here, once per change.
			parsed, err := protocol.ParsePerIPOverrides(ov)
			if err != nil {
				logger.Warn("max.connections.per.ip.overrides: keeping the previous overrides", "err", err)
			} else {
				perIPOverrides, lastOverrides = parsed, ov
			}
		}
		srv.SetConnectionLimits(int(cfg.Int("max.connections", 10000)), int(cfg.Int("max.connections.per.ip", math.MaxInt32)),
			perIPOverrides, float64(cfg.Int("max.connection.creation.rate", math.MaxInt32)))
	})
	bls, err := listenKafka(cfg, func(mech, user string) (security.ScramCredential, bool) {
		return b.Image().ScramCredentialOf(user, mech)
	})
	if err != nil {
		return nil, err
	}
	n.bls = bls
	// Requests but ApiVersions wait for the metadata catch-up
	// (holdUntilCaughtUp, started below).
	ready := make(chan struct{})
	srv.HoldRequests(ready)
	n.errc = make(chan error, 2+len(bls))
	for _, bl := range bls {
		go func() { n.errc <- srv.ServeListener(bl.ln, bl.pl) }()
	}
	n.srv = srv
	if cfg.HTTP != "" {
		hln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return nil, err
		}
		n.httpAddr = hln.Addr()
		n.st = status.New(status.Options{Broker: b, Groups: n.handlers.Groups().Summaries, SharePartitions: n.handlers.SharePartitions().Statuses,
			Transactions: func() []status.Transaction { return status.OpenTransactions(n.handlers.Transactions()) }, Version: o.Version,
			Debug: cfg.Bool("sluice.http.debug.enable", false), PeerTLS: httpSec.peerTLS, PeerToken: httpSec.peerToken})
		// /debug/disk too is behind the credentials.
		n.hs = &http.Server{Handler: httpSec.auth.Protect(status.WithDiskFaults(n.st.Handler(), disk)),
			ReadHeaderTimeout: 10 * time.Second,
			// Failed TLS handshakes (plain HTTP, unknown certificates)
			// are a client's problem: debug level.
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
		if httpSec.tls != nil {
			hln = tls.NewListener(hln, httpSec.tls)
		}
		go func() {
			if err := n.hs.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.errc <- err
			}
		}()
	}
	logger.Info("sluice serving", "node", cfg.NodeID, "kafka", describeListeners(bls), "http", cfg.HTTP, "data", cfg.DataDir)
	n.stopWatch = make(chan struct{})
	go holdUntilCaughtUp(b, ready, logger, n.stopWatch)
	go watchQuorum(ctrl, cfg, logger, n.stopWatch)
	go bootstrapScram(cfg, b, logger, n.stopWatch)
	if remoteS3 != nil {
		go watchRemoteStore(remoteS3, logger, n.stopWatch)
	}
	n.failed = make(chan struct{})
	n.closing = make(chan struct{})
	n.monitorDone = make(chan struct{})
	n.done = make(chan struct{})
	go n.monitor()
	ok = true
	return n, nil
}

// abort undoes a failed Start: what was started is closed, without the
// shutdown steps.
func (n *Node) abort() {
	if n.srv != nil {
		n.srv.Close()
	}
	if n.b != nil {
		n.b.Close()
	}
	if n.ctrl != nil {
		n.ctrl.Close()
	}
	n.lock.Release()
}

// monitor records the first server error before the shutdown begins.
func (n *Node) monitor() {
	defer close(n.monitorDone)
	select {
	case err := <-n.errc:
		n.failErr = err
		close(n.failed)
	case <-n.closing:
	}
}

// Wait returns when one of the node's servers fails (its error; the node
// must still be closed) or when the node has been closed (Close's error).
func (n *Node) Wait() error {
	select {
	case <-n.failed:
		return n.failErr
	case <-n.done:
		return n.closeErr
	}
}

// Close stops the node gracefully: Shutdown without a way to force it.
func (n *Node) Close() error { return n.Shutdown(nil) }

// Shutdown stops the node. Unless a server had failed, it first runs the
// controlled shutdown (controlledShutdown: leadership moved away and the
// ISRs left while still serving), abandoned when forced closes; then the
// HTTP port, the Kafka listeners, the handlers, the broker and the
// controller close, each logged with its duration. It returns the
// failure that stopped the node, else the first error of the steps.
// Later calls wait for the first and return its result.
func (n *Node) Shutdown(forced <-chan struct{}) error {
	n.closeOnce.Do(func() {
		close(n.closing)
		<-n.monitorDone
		err := n.failErr
		closeNow := false
		if err == nil {
			closeNow = controlledShutdown(n.cfg, n.b, n.log, forced)
		}
		// Each shutdown step is logged with its duration, so a slow one
		// can be named (the chaos harness kills a node whose SIGTERM
		// takes over 40 s).
		step := func(name string, f func() error) {
			t0 := time.Now()
			cerr := f()
			n.log.Info("shutdown step done", "step", name, "took", time.Since(t0).Round(time.Millisecond))
			if err == nil {
				err = cerr
			}
		}
		if n.hs != nil {
			step("http", n.hs.Close)
		}
		step("kafka listener and connections", n.srv.Close)
		step("handlers", func() error { n.handlers.Close(); return nil })
		step("broker (fetchers, partitions, checkpoints)", n.b.Close)
		if c, ok := n.ctrl.(*controller.Node); ok && closeNow {
			step("controller (at once)", c.CloseNow)
		} else if n.ctrl != nil {
			step("controller", n.ctrl.Close)
		}
		close(n.stopWatch)
		if n.st != nil {
			n.st.Close()
		}
		n.lock.Release()
		n.closeErr = err
		close(n.done)
	})
	<-n.done
	return n.closeErr
}

// Broker is the node's broker.
func (n *Node) Broker() *broker.Broker { return n.b }

// KafkaAddrs returns the bound address of each Kafka listener by
// listener name.
func (n *Node) KafkaAddrs() map[string]net.Addr {
	m := make(map[string]net.Addr, len(n.bls))
	for _, bl := range n.bls {
		m[bl.cfg.Name] = bl.ln.Addr()
	}
	return m
}

// HTTPAddr returns the bound address of the HTTP port, nil without one.
func (n *Node) HTTPAddr() net.Addr { return n.httpAddr }

// startController starts the node's Raft metadata quorum member. A node
// in --voters is a voter and needs --controller-listen (or its address in
// --voters); other nodes follow the committed metadata as brokers only. A
// node without --voters is a quorum of itself (standalone.go): sa is then
// what it needs after the broker opened. clusterID is the id a new quorum
// takes (a formatted directory's), "" for a random one; directoryID and
// dirKept are the data directory's identity (metaprops.Identity).
func startController(cfg *config.Broker, clusterID, directoryID string, dirKept bool, logger *slog.Logger) (ctrl *controller.Node, sa *standalone, err error) {
	self, err := broker.SelfBroker(cfg)
	if err != nil {
		return nil, nil, err
	}
	// The directory's identity: a wiped directory registers with a new
	// one and leaves every ELR (internal/controller/elr.go).
	self.DirectoryID = directoryID
	voters := cfg.Voters
	listen := cfg.ControllerListen
	// KIP-853: a node without voters that names other controllers in
	// controller.quorum.bootstrap.servers follows their quorum.
	bootstrap, selfOnly := cfg.QuorumBootstrap()
	if selfOnly {
		bootstrap = nil
	}
	if len(voters) == 0 && len(bootstrap) == 0 {
		if sa, err = prepareStandalone(cfg, self.Host); err != nil {
			return nil, nil, err
		}
		voters = sa.voters
	}
	for _, v := range voters {
		if v.ID == cfg.NodeID && listen == "" {
			listen = v.Addr
		}
	}
	// KIP-578's partition limits, enforced by the active controller on
	// CreateTopics and CreatePartitions.
	lim := metadata.LimitsOf(cfg)
	serverTLS, clientTLS, err := controllerTLS(cfg, voters, logger)
	if err == nil {
		cc := controller.Config{
			NodeID: cfg.NodeID, Voters: voters, Bootstrap: bootstrap, ControllerListen: listen, DataDir: cfg.DataDir,
			Self: self, Broker: cfg, Logger: logger,
			MaxBrokerPartitions: lim.MaxBrokerPartitions, MaxPartitions: lim.MaxPartitions,
			ServerTLS: serverTLS, ClientTLS: clientTLS, ClusterID: clusterID, DirectoryKept: dirKept,
		}
		if sa != nil {
			cc.Standalone, cc.Listener, cc.Import = true, sa.ln, sa.imported
		}
		ctrl, err = controller.Start(cc)
	}
	if err != nil && sa != nil {
		sa.ln.Close()
	}
	return ctrl, sa, err
}

// controllerTLS builds the controller port's TLS configurations when the
// CONTROLLER listener is mapped to SSL, from the ssl.* settings
// (listener.name.controller.ssl.* first): the server side for a voter,
// the client side (this node's certificate and the trust store) for
// every node. Without ssl.client.auth=required any TLS client may use
// the port, which is logged.
func controllerTLS(cfg *config.Broker, voters []config.Voter, logger *slog.Logger) (server, client *tls.Config, err error) {
	proto, err := cfg.ControllerProtocol()
	if err != nil || proto != config.ProtoSSL {
		return nil, nil, err
	}
	const l = config.ControllerListenerName
	voter := false
	for _, v := range voters {
		voter = voter || v.ID == cfg.NodeID
	}
	if voter {
		if server, err = security.ServerTLS(cfg, l); err != nil {
			return nil, nil, err
		}
		if server.ClientAuth != tls.RequireAndVerifyClientCert {
			logger.Warn("the CONTROLLER listener is SSL without ssl.client.auth=required: any TLS client can reach the metadata quorum; set listener.name.controller.ssl.client.auth=required (docs/security.md)")
		}
	}
	if client, err = security.ClientTLS(cfg, l); err != nil {
		return nil, nil, err
	}
	return server, client, nil
}
