package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metaprops"
)

const storageUsage = `usage: sluice storage format --cluster-id ID (--standalone | --initial-controllers ID@HOST:PORT:DIRID,...)
                             [--config server.properties] [--node-id N] [--data-dir DIR]
                             [--controller-listen HOST:PORT] [--ignore-formatted]
       sluice storage random-uuid

kafka-storage.sh's commands. format prepares a new node's data directory
for a new cluster: meta.properties with the cluster id, and the controller
quorum the cluster starts with (--standalone: this node alone, on its
CONTROLLER listener; --initial-controllers: the listed voters, as
controller.quorum.voters plus each voter's directory id). A later
` + "`sluice serve`" + ` with the same settings and no --voters starts that quorum with
that cluster id; the quorum can then grow with ` + "`sluice quorum add-controller`" + `.
A directory that is already formatted is refused (skipped with
--ignore-formatted). random-uuid prints a new cluster id.
(docs/operations.md, "Formatting a data directory")

flags:
`

// storageCmd implements sluice storage.
func storageCmd(args []string) error {
	if len(args) == 0 {
		return &usageError{"storage: format or random-uuid?", storageUsage}
	}
	switch args[0] {
	case "random-uuid":
		if len(args) > 1 {
			return &usageError{fmt.Sprintf("storage random-uuid: unexpected arguments %v", args[1:]), storageUsage}
		}
		fmt.Println(metaprops.RandomUUID())
		return nil
	case "format":
		return storageFormat(args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(os.Stderr, storageUsage)
		return nil
	}
	return &usageError{fmt.Sprintf("storage: unknown command %q", args[0]), storageUsage}
}

func storageFormat(args []string) error {
	fs := flag.NewFlagSet("storage format", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), storageUsage)
		fs.PrintDefaults()
	}
	cfgFile := fs.String("config", "", "Kafka-style server.properties file (node.id, log.dirs, listeners)")
	clusterID := fs.String("cluster-id", "", "the new cluster's id (sluice storage random-uuid)")
	standalone := fs.Bool("standalone", false, "the quorum is this node alone, on its CONTROLLER listener")
	initial := fs.String("initial-controllers", "", "the initial quorum: ID@HOST:PORT:DIRECTORYID,...")
	ignore := fs.Bool("ignore-formatted", false, "skip a directory that is already formatted instead of failing")
	nodeID := fs.Int("node-id", -1, "node.id (overrides --config)")
	dataDir := fs.String("data-dir", "", "data directory, log.dirs (overrides --config)")
	ctrl := fs.String("controller-listen", "", "the CONTROLLER listener host:port (overrides --config)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("storage format: unexpected arguments %v", fs.Args()), storageUsage}
	}
	if *clusterID == "" {
		return &usageError{"storage format: --cluster-id is required", storageUsage}
	}
	if *standalone == (*initial != "") {
		return &usageError{"storage format: give one of --standalone and --initial-controllers", storageUsage}
	}
	cfg := config.Defaults()
	if *cfgFile != "" {
		if err := cfg.LoadFile(*cfgFile); err != nil {
			return err
		}
	}
	if *nodeID >= 0 {
		cfg.NodeID = int32(*nodeID)
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *ctrl != "" {
		cfg.ControllerListen = *ctrl
	}
	if _, ok := cfg.Props["node.id"]; !ok && *nodeID < 0 {
		return errors.New("storage format: no node id: set node.id in --config or --node-id")
	}
	if cfg.DataDir == "" {
		return errors.New("storage format: no data directory: set log.dirs in --config or --data-dir")
	}
	if err := metaprops.CheckUUID(*clusterID); err != nil {
		return fmt.Errorf("storage format: --cluster-id: %w", err)
	}
	var voters, dirID string
	if *standalone {
		addr, err := controllerAddress(cfg)
		if err != nil {
			return err
		}
		voters = fmt.Sprintf("%d@%s", cfg.NodeID, addr)
	} else {
		var err error
		if voters, dirID, err = initialControllers(*initial, cfg.NodeID); err != nil {
			return err
		}
	}
	err := metaprops.Format(cfg.DataDir, cfg.NodeID, dirID, metaprops.Bootstrap{ClusterID: *clusterID, Voters: voters})
	if errors.Is(err, metaprops.ErrFormatted) && *ignore {
		fmt.Printf("%s is already formatted: skipped (--ignore-formatted)\n", cfg.DataDir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage format: %w", err)
	}
	fmt.Printf("Formatted %s: cluster %s, node %d, controller quorum %s\n", cfg.DataDir, *clusterID, cfg.NodeID, voters)
	return nil
}

// controllerAddress is the address the other voters dial for this node's
// controller: the CONTROLLER entry of advertised.listeners, else of
// listeners (--controller-listen), a wildcard host replaced by the host
// the node advertises to the other brokers.
func controllerAddress(cfg *config.Broker) (string, error) {
	addr := cfg.ControllerListen
	for _, l := range strings.Split(cfg.Props["advertised.listeners"], ",") {
		if name, a, ok := strings.Cut(strings.TrimSpace(l), "://"); ok && strings.EqualFold(name, config.ControllerListenerName) {
			addr = a
		}
	}
	if addr == "" {
		return "", errors.New("storage format --standalone: no CONTROLLER listener: add CONTROLLER://host:port to listeners in --config, or give --controller-listen")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("storage format: CONTROLLER listener %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		self, err := broker.SelfBroker(cfg)
		if err != nil {
			return "", err
		}
		host = self.Host
	}
	return net.JoinHostPort(host, port), nil
}

// initialControllers parses --initial-controllers (Kafka's
// ID@HOST:PORT:DIRECTORYID,...) into controller.quorum.voters' form and
// this node's directory id ("" when it is not one of them).
func initialControllers(v string, self int32) (voters, dirID string, err error) {
	var out []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		i := strings.LastIndexByte(e, ':')
		if i < 0 {
			return "", "", fmt.Errorf("storage format: --initial-controllers entry %q: want ID@HOST:PORT:DIRECTORYID", e)
		}
		voter, dir := e[:i], e[i+1:]
		vs, err := config.ParseVoters(voter)
		if err != nil || len(vs) != 1 {
			return "", "", fmt.Errorf("storage format: --initial-controllers entry %q: want ID@HOST:PORT:DIRECTORYID (%v)", e, err)
		}
		if err := metaprops.CheckUUID(dir); err != nil {
			return "", "", fmt.Errorf("storage format: --initial-controllers entry %q: directory id: %w", e, err)
		}
		if vs[0].ID == self {
			dirID = dir
		}
		out = append(out, strconv.Itoa(int(vs[0].ID))+"@"+vs[0].Addr)
	}
	return strings.Join(out, ","), dirID, nil
}
