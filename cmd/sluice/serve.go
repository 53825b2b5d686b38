package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/logging"
	"github.com/sluice-io/sluice/internal/node"
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
	if err == nil && len(cfg.Voters) == 0 {
		// A data directory formatted with its quorum (sluice storage
		// format): its voters, as if given with --voters.
		_, err = node.ApplyFormat(cfg)
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

// serve runs `sluice serve`: the node (internal/node) until SIGINT or
// SIGTERM, or until one of its servers fails.
func serve(args []string) error {
	cfg, level, err := parseServe(args)
	if err != nil {
		return err
	}
	// Repeated warnings and errors (a peer down, a fetch failing every
	// backoff) are written once per 5 s with a count (internal/logging).
	logger := slog.New(logging.RateLimit(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}), 5*time.Second, nil))
	slog.SetDefault(logger)
	n, err := node.Start(cfg, node.Options{Logger: logger, Version: buildVersion(),
		// SLUICE_FAULT_INJECTION=1 wraps the data directory's filesystem
		// with a switchable disk fault (slow or failing writes and
		// fsyncs), driven through POST /debug/disk on the --http listener
		// (docs/storage.md).
		FaultInjection: os.Getenv("SLUICE_FAULT_INJECTION") == "1",
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
		return err
	}
	sig := make(chan os.Signal, 3)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	failed := make(chan error, 1)
	go func() { failed <- n.Wait() }()
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
		return n.Shutdown(forced)
	case <-failed:
		// The failure is what Close returns.
		return n.Close()
	}
}

// exitNow ends the process at once (a third signal during shutdown).
func exitNow(logger *slog.Logger) {
	logger.Error("third signal: exiting immediately, without finishing the shutdown")
	os.Exit(1)
}
