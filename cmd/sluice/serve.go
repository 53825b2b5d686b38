package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/dirlock"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/status"
	"github.com/sluice-io/sluice/internal/vfs"
)

// parseServe builds the broker configuration: defaults, then the
// --config file, then flags (flags win).
func parseServe(args []string) (*config.Broker, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	nodeID := fs.Int("node-id", 1, "node id (node.id)")
	listen := fs.String("listen", "127.0.0.1:9092", "Kafka listener host:port")
	ctrl := fs.String("controller-listen", "", "controller quorum listener host:port")
	voters := fs.String("voters", "", "controller quorum voters id@host:port,... (controller.quorum.voters)")
	dataDir := fs.String("data-dir", "./sluice-data", "data directory (log.dirs)")
	httpAddr := fs.String("http", "", "HTTP status, JSON API and /metrics listener host:port")
	cfgFile := fs.String("config", "", "Kafka-style server.properties file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg := config.Defaults()
	if *cfgFile != "" {
		if err := cfg.LoadFile(*cfgFile); err != nil {
			return nil, err
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "node-id":
			cfg.NodeID = int32(*nodeID)
			cfg.Props["node.id"] = strconv.Itoa(*nodeID)
		case "listen":
			cfg.Listen = *listen
		case "controller-listen":
			cfg.ControllerListen = *ctrl
		case "voters":
			cfg.Voters, err = config.ParseVoters(*voters)
		case "data-dir":
			cfg.DataDir = *dataDir
		case "http":
			cfg.HTTP = *httpAddr
		}
	})
	return cfg, err
}

func serve(args []string) error {
	cfg, err := parseServe(args)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)
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
	// SLUICE_FAULT_INJECTION=1 wraps the data directory's filesystem with a
	// switchable disk fault (slow or failing writes and fsyncs), driven
	// through POST /debug/disk on the --http listener (docs/storage.md).
	// Off by default: the plain OS filesystem keeps the sendfile path.
	var fsys vfs.FS = vfs.Default
	var disk *vfs.DiskFaults
	if os.Getenv("SLUICE_FAULT_INJECTION") == "1" {
		disk = vfs.NewDiskFaults(cfg.DataDir)
		fsys = vfs.WithFaults(vfs.Default, disk)
		logger.Warn("SLUICE_FAULT_INJECTION=1: disk faults can be injected into the data directory through POST /debug/disk on the --http listener; not for production",
			"data", cfg.DataDir, "http", cfg.HTTP)
	}
	ctrl, err := startController(cfg, logger)
	if err != nil {
		return err
	}
	b, err := broker.Open(broker.Options{Config: cfg, FS: fsys, Logger: logger, Controller: ctrl,
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
	handlers := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{
		MaxRequestBytes: int32(cfg.Int("socket.request.max.bytes", 100<<20)),
		MaxConnections:  int(cfg.Int("max.connections", 10000)),
		Logger:          logger,
	}, reg)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var hs *http.Server
	if cfg.HTTP != "" {
		hln, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			srv.Close()
			return err
		}
		st := status.New(status.Options{Broker: b, Groups: handlers.Groups().Summaries, Version: version})
		defer st.Close()
		hs = &http.Server{Handler: status.WithDiskFaults(st.Handler(), disk)}
		go func() {
			if err := hs.Serve(hln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	logger.Info("sluice serving", "node", cfg.NodeID, "kafka", ln.Addr().String(), "http", cfg.HTTP, "data", cfg.DataDir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
		if s == syscall.SIGTERM {
			// Controlled shutdown (KRaft §4.3): move leadership away and
			// leave the ISRs while still serving, so clients follow the
			// new leaders without errors.
			t0 := time.Now()
			if err := b.ControlledShutdown(30 * time.Second); err != nil {
				logger.Warn("controlled shutdown", "err", err, "took", time.Since(t0).Round(time.Millisecond))
			} else {
				logger.Info("controlled shutdown granted", "took", time.Since(t0).Round(time.Millisecond))
			}
		}
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
	if ctrl != nil {
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
	return controller.Start(controller.Config{
		NodeID: cfg.NodeID, Voters: cfg.Voters, ControllerListen: listen, DataDir: cfg.DataDir,
		Self: self, Broker: cfg, Logger: logger,
	})
}
