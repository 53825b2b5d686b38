package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
)

// dev runs a local cluster for development. A one-broker cluster runs in
// this process; multi-broker clusters need the replicated controller.
func dev(args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	brokers := fs.Int("brokers", 1, "number of brokers")
	basePort := fs.Int("base-port", 9092, "first Kafka port; broker i listens on base-port + 100*i")
	dataDir := fs.String("data-dir", "./sluice-dev", "parent folder of every broker's data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers != 1 {
		return errors.New("sluice dev: only --brokers 1 is supported until multi-broker clusters land")
	}
	fmt.Printf("bootstrap: 127.0.0.1:%d\n", *basePort)
	return serve([]string{
		"--node-id", "1",
		"--listen", "127.0.0.1:" + strconv.Itoa(*basePort),
		"--data-dir", filepath.Join(*dataDir, "broker-1"),
		"--http", "127.0.0.1:" + strconv.Itoa(*basePort+2),
	})
}
