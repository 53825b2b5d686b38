package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// brokerEpochFile, in the data directory, holds the broker epoch of the
// node's last registration. The next registration sends it as Kafka's
// previousBrokerEpoch: the proof that this directory is the one the
// broker ran on, so that it may stay in the partitions' ELRs (elr.go). It
// is written (fsynced) after each registration, not only at a clean
// shutdown as Kafka's .kafka_cleanshutdown, because sluice fsyncs every
// record before it counts toward the high watermark: a crash keeps
// everything the ELR relies on, a wiped or replaced directory does not,
// and it has no such file.
const brokerEpochFile = ".sluice_broker_epoch"

// PreviousEpochKept is the previous broker epoch a registration sends
// when its data directory predates the start but holds no broker epoch
// file (Config.DirectoryKept): the directory an earlier binary ran on.
const PreviousEpochKept int64 = -2

// previousEpoch is the previousBrokerEpoch of this start's registration:
// the epoch dir recorded, PreviousEpochKept for a kept directory without
// one, -1 otherwise.
func previousEpoch(dir string, kept bool) int64 {
	e := readBrokerEpoch(dir)
	if e < 0 && kept {
		return PreviousEpochKept
	}
	return e
}

// readBrokerEpoch returns the epoch dir recorded, -1 if none.
func readBrokerEpoch(dir string) int64 {
	if dir == "" {
		return -1
	}
	data, err := os.ReadFile(filepath.Join(dir, brokerEpochFile))
	if err != nil {
		return -1
	}
	e, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || e <= 0 {
		return -1
	}
	return e
}

// writeBrokerEpoch records epoch in dir durably: a temporary file
// fsynced, renamed over the old one, and the directory fsynced.
func writeBrokerEpoch(dir string, epoch int64) error {
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, brokerEpochFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%d\n", epoch); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
