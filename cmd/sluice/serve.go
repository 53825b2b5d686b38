package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/dirlock"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/logging"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metaprops"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/security"
	"github.com/sluice-io/sluice/internal/status"
	"github.com/sluice-io/sluice/internal/vfs"
)

// serveUsage heads `sluice serve --help`.
const serveUsage = `usage: sluice serve [flags]

Runs one node: a Kafka listener, its partition replicas and, when its id is
in --voters (or with no --voters at all), a controller quorum member.
Settings come from Kafka's defaults, then --config, then flags (flags win);
every key and flag is validated at start (docs/configuration.md).

flags:
`

// parseServe builds the broker configuration: defaults, then the
// --config file, then flags (flags win). Every flag is validated like the
// server.properties key it stands for; the error names the flag, the
// value and what is expected. It also returns the --log-level.
func parseServe(args []string) (*config.Broker, slog.Level, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	nodeID := fs.Int("node-id", 1, "node id (node.id), at least 0")
	listen := fs.String("listen", "127.0.0.1:9092", "Kafka listener host:port (listeners)")
	ctrl := fs.String("controller-listen", "", "controller quorum listener host:port (the CONTROLLER entry of listeners)")
	voters := fs.String("voters", "", "controller quorum voters id@host:port,... (controller.quorum.voters)")
	dataDir := fs.String("data-dir", "./sluice-data", "data directory (log.dirs)")
	httpAddr := fs.String("http", "", "HTTP status, JSON API and /metrics listener host:port")
	cfgFile := fs.String("config", "", "Kafka-style server.properties file")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, 0, err
	}
	if fs.NArg() > 0 {
		return nil, 0, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var level slog.Level
	switch *logLevel {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, 0, fmt.Errorf("invalid value %q for --log-level: expected one of debug, info, warn, error", *logLevel)
	}
	cfg := config.Defaults()
	if *cfgFile != "" {
		if err := cfg.LoadFile(*cfgFile); err != nil {
			return nil, 0, err
		}
	}
	hostPort := func(flagName, v string) error {
		if err := config.CheckHostPort(v); err != nil {
			return fmt.Errorf("invalid value %q for --%s: %v", v, flagName, err)
		}
		return nil
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		switch f.Name {
		case "node-id":
			v := strconv.Itoa(*nodeID)
			d, _ := config.BrokerDef("node.id")
			if err = d.Validate(v); err != nil {
				err = fmt.Errorf("--node-id: %w", err)
				return
			}
			cfg.NodeID = int32(*nodeID)
			cfg.Props["node.id"] = v
		case "listen":
			if err = hostPort("listen", *listen); err == nil {
				cfg.Listen = *listen
			}
		case "controller-listen":
			if *ctrl != "" {
				err = hostPort("controller-listen", *ctrl)
			}
			cfg.ControllerListen = *ctrl
		case "voters":
			cfg.Voters, err = config.ParseVoters(*voters)
			if err != nil {
				err = fmt.Errorf("invalid value %q for --voters: expected id@host:port,... (%v)", *voters, err)
			}
		case "data-dir":
			if *dataDir == "" {
				err = errors.New(`invalid value "" for --data-dir: expected a directory`)
			}
			cfg.DataDir = *dataDir
		case "http":
			if *httpAddr != "" {
				err = hostPort("http", *httpAddr)
			}
			cfg.HTTP = *httpAddr
		}
	})
	if err == nil && cfg.DataDir == "" {
		err = errors.New("no data directory: set --data-dir or log.dirs")
	}
	if err == nil {
		// The listener settings together (each key alone was checked):
		// protocols, advertised names, the inter-broker listener.
		err = cfg.CheckListeners()
	}
	if err == nil {
		// process.roles and the quorum together, after --voters.
		err = cfg.CheckRoles()
	}
	if err == nil {
		// metadata.log.dir against the data directory, after --data-dir.
		err = cfg.CheckDirs()
	}
	return cfg, level, err
}

func serve(args []string) error {
	cfg, level, err := parseServe(args)
	if err != nil {
		return err
	}
	// Repeated warnings and errors (a peer down, a fetch failing every
	// backoff) are written once per 5 s with a count (internal/logging).
	logger := slog.New(logging.RateLimit(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}), 5*time.Second, nil))
	slog.SetDefault(logger)
	// Kafka's AbstractConfig.logUnused: an unknown key is a warning, not
	// an error, so a Kafka user's server.properties works as it is.
	for _, k := range config.UnknownBrokerKeys(cfg.Props) {
		logger.Warn(fmt.Sprintf("The configuration '%s' was supplied but isn't a known config.", k))
	}
	// Settings sluice accepts but ignores (StatusIgnored), set to other
	// than their default: one warning names them all. The refused ones
	// (StatusRefused) stopped the start in parseServe.
	if keys := config.IgnoredBrokerKeys(cfg.Props); len(keys) > 0 {
		logger.Warn("settings ignored by sluice: accepted, but they change nothing (docs/configuration.md, status ignored)", "keys", strings.Join(keys, ","))
	}
	var httpSec *httpSecurity
	if cfg.HTTP != "" {
		if httpSec, err = httpSecurityFrom(cfg); err != nil {
			return err
		}
	} else if keys := httpOnlyKeys(cfg); len(keys) > 0 {
		logger.Warn("--http port settings without --http: no effect", "keys", strings.Join(keys, ","))
	}
	// The data directory is ours alone for the life of the process
	// (Kafka's .lock in every log dir): a second process on it would
	// interleave writes and skip recovery on the other's clean-shutdown
	// marker. Taken before anything reads or writes the directory; the
	// kernel drops it when the process exits.
	lock, err := dirlock.Acquire(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Release()
	// Whose directory (node and cluster), written by which format
	// (Kafka's meta.properties): checked before anything else reads it.
	// A start that would put the directory in another cluster (a quorum
	// member's started without --voters, say) is refused here with
	// nothing changed, or, for a cluster id learnt from the quorum, before
	// the broker acts on its metadata (broker.Options.JoinCluster).
	newClusterID := metadata.NewUUID().String()[:22]
	ident, err := metaprops.Open(cfg.DataDir, cfg.NodeID, metaprops.Start{Quorum: len(cfg.Voters) > 0, NewClusterID: newClusterID})
	if err != nil {
		return err
	}
	// SLUICE_FAULT_INJECTION=1 wraps the data directory's filesystem with a
	// switchable disk fault (slow or failing writes and fsyncs), driven
	// through POST /debug/disk on the --http listener (docs/storage.md).
	var fsys vfs.FS = vfs.Default
	var disk *vfs.DiskFaults
	if os.Getenv("SLUICE_FAULT_INJECTION") == "1" {
		disk = vfs.NewDiskFaults(cfg.DataDir)
		fsys = vfs.WithFaults(vfs.Default, disk)
		logger.Warn("SLUICE_FAULT_INJECTION=1: disk faults can be injected into the data directory through POST /debug/disk on the --http listener; not for production",
			"data", cfg.DataDir, "http", cfg.HTTP)
	}
	fsys = fileCache(fsys, cfg, raiseFileLimit(logger), logger)
	ctrl, err := startController(cfg, logger)
	if err != nil {
		return err
	}
	b, err := broker.Open(broker.Options{Config: cfg, FS: fsys, Logger: logger, Controller: ctrl,
		NewClusterID: newClusterID, JoinCluster: ident.Join,
		// A failed data directory halts the process, as Kafka's
		// LogManager does when its last log dir fails (Exit.halt(1)): no
		// controlled shutdown, no deferred cleanup, nothing more
		// acknowledged. The broker has logged the failure.
		OnFatal: func(err error) {
			logger.Error("halting (exit status 1)", "err", err)
			os.Exit(1)
		},
	})
	if err != nil {
		if ctrl != nil {
			ctrl.Close()
		}
		return err
	}
	defer b.Close()
	reg := protocol.NewRegistry()
	handlers := handler.RegisterWith(reg, b, handler.OptionsFromConfig(cfg))
	overrides, _ := cfg.Get("max.connections.per.ip.overrides")
	perIPOverrides, err := protocol.ParsePerIPOverrides(overrides)
	if err != nil {
		return err
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
		return err
	}
	errc := make(chan error, 1+len(bls))
	for _, bl := range bls {
		go func() { errc <- srv.ServeListener(bl.ln, bl.pl) }()
	}
	var hs *http.Server
	if cfg.HTTP != "" {
		hln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			srv.Close()
			return err
		}
		st := status.New(status.Options{Broker: b, Groups: handlers.Groups().Summaries,
			Transactions: func() []status.Transaction { return status.OpenTransactions(handlers.Transactions()) }, Version: buildVersion(),
			Debug: cfg.Bool("sluice.http.debug.enable", false), PeerTLS: httpSec.peerTLS, PeerToken: httpSec.peerToken})
		defer st.Close()
		// /debug/disk too is behind the credentials.
		hs = &http.Server{Handler: httpSec.auth.Protect(status.WithDiskFaults(st.Handler(), disk)),
			ReadHeaderTimeout: 10 * time.Second,
			// Failed TLS handshakes (plain HTTP, unknown certificates)
			// are a client's problem: debug level.
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
		if httpSec.tls != nil {
			hln = tls.NewListener(hln, httpSec.tls)
		}
		go func() {
			if err := hs.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	logger.Info("sluice serving", "node", cfg.NodeID, "kafka", describeListeners(bls), "http", cfg.HTTP, "data", cfg.DataDir)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go watchQuorum(ctrl, cfg, logger, stopWatch)
	go bootstrapScram(cfg, b, logger, stopWatch)
	closeNow := false
	sig := make(chan os.Signal, 3)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
		// A second SIGINT or SIGTERM skips (or abandons) the controlled
		// shutdown; the node still flushes and closes everything. A
		// third exits at once.
		forced := make(chan struct{})
		go func() {
			s := <-sig
			logger.Warn("second signal: stopping now, without controlled shutdown", "signal", s.String())
			close(forced)
			<-sig
			exitNow(logger)
		}()
		// SIGTERM and SIGINT (Ctrl-C) alike: controlled shutdown
		// (docs/kafka-replication.md §4.3): move leadership away and leave the
		// ISRs while still serving, so clients follow the new leaders without
		// errors.
		closeNow = controlledShutdown(cfg, b, logger, forced)
	case err = <-errc:
	}
	// Each shutdown step is logged with its duration, so a slow one can
	// be named (the chaos harness kills a node whose SIGTERM takes over
	// 40 s).
	step := func(name string, f func() error) {
		t0 := time.Now()
		cerr := f()
		logger.Info("shutdown step done", "step", name, "took", time.Since(t0).Round(time.Millisecond))
		if err == nil {
			err = cerr
		}
	}
	if hs != nil {
		step("http", hs.Close)
	}
	step("kafka listener and connections", srv.Close)
	step("handlers", func() error { handlers.Close(); return nil })
	step("broker (fetchers, partitions, checkpoints)", b.Close)
	if n, ok := ctrl.(*controller.Node); ok && closeNow {
		step("controller (at once)", n.CloseNow)
	} else if ctrl != nil {
		step("controller", ctrl.Close)
	}
	return err
}

// startController starts the Raft metadata quorum member when --voters is
// given (nil means the single-node Local store, which broker.Open opens).
// A node in --voters is a voter and needs --controller-listen; other nodes
// follow the committed metadata as brokers only.
func startController(cfg *config.Broker, logger *slog.Logger) (metadata.Controller, error) {
	if len(cfg.Voters) == 0 {
		return nil, nil
	}
	self, err := broker.SelfBroker(cfg)
	if err != nil {
		return nil, err
	}
	listen := cfg.ControllerListen
	for _, v := range cfg.Voters {
		if v.ID == cfg.NodeID && listen == "" {
			listen = v.Addr
		}
	}
	// KIP-578's partition limits, enforced by the active controller on
	// CreateTopics and CreatePartitions (metadata.Local reads them from cfg).
	lim := metadata.LimitsOf(cfg)
	serverTLS, clientTLS, err := controllerTLS(cfg, logger)
	if err != nil {
		return nil, err
	}
	return controller.Start(controller.Config{
		NodeID: cfg.NodeID, Voters: cfg.Voters, ControllerListen: listen, DataDir: cfg.DataDir,
		Self: self, Broker: cfg, Logger: logger,
		MaxBrokerPartitions: lim.MaxBrokerPartitions, MaxPartitions: lim.MaxPartitions,
		ServerTLS: serverTLS, ClientTLS: clientTLS,
	})
}

// controllerTLS builds the controller port's TLS configurations when the
// CONTROLLER listener is mapped to SSL, from the ssl.* settings
// (listener.name.controller.ssl.* first): the server side for a voter,
// the client side (this node's certificate and the trust store) for
// every node. Without ssl.client.auth=required any TLS client may use
// the port, which is logged.
func controllerTLS(cfg *config.Broker, logger *slog.Logger) (server, client *tls.Config, err error) {
	proto, err := cfg.ControllerProtocol()
	if err != nil || proto != config.ProtoSSL {
		return nil, nil, err
	}
	const l = config.ControllerListenerName
	voter := false
	for _, v := range cfg.Voters {
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
