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

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/status"
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
	if len(cfg.Voters) > 1 {
		return errors.New("multi-node controller quorums are not supported yet; run without --voters (or with this node alone)")
	}
	b, err := broker.Open(broker.Options{Config: cfg, Logger: logger})
	if err != nil {
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
		hs = &http.Server{Handler: status.Handler(b)}
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
	case err = <-errc:
	}
	if hs != nil {
		hs.Close()
	}
	srv.Close()
	handlers.Close()
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}
