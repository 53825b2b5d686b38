package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dev runs a local cluster for development: one `sluice serve` process per
// broker, Kafka on consecutive ports from --base-port, data under one
// folder. The first min(N, 3) brokers are the controller quorum's voters;
// broker i's controller listens on base-port+100+i-1 and its HTTP status
// page on base-port+200+i-1. Ctrl-C (or SIGTERM) stops them all with a
// controlled shutdown.
func dev(args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	brokers := fs.Int("brokers", 3, "number of brokers (1-9)")
	basePort := fs.Int("base-port", 9092, "Kafka port of broker 1; broker i listens on base-port+i-1")
	dataDir := fs.String("data-dir", "./sluice-dev", "parent folder of every broker's data")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n := *brokers
	if n < 1 || n > 9 {
		return errors.New("--brokers must be between 1 and 9")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	kafka := func(i int) int { return *basePort + i - 1 }
	ctrl := func(i int) int { return *basePort + 100 + i - 1 }
	http := func(i int) int { return *basePort + 200 + i - 1 }
	var voters []string
	for i := 1; i <= min(n, 3); i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i, ctrl(i)))
	}
	var procs []*exec.Cmd
	var bootstrap []string
	for i := 1; i <= n; i++ {
		args := []string{"serve", "--node-id", strconv.Itoa(i),
			"--listen", "127.0.0.1:" + strconv.Itoa(kafka(i)),
			"--data-dir", filepath.Join(*dataDir, "broker-"+strconv.Itoa(i)),
			"--http", "127.0.0.1:" + strconv.Itoa(http(i)),
			"--voters", strings.Join(voters, ",")}
		if i <= 3 {
			args = append(args, "--controller-listen", "127.0.0.1:"+strconv.Itoa(ctrl(i)))
		}
		cmd := exec.Command(self, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			stopAll(procs)
			return err
		}
		procs = append(procs, cmd)
		bootstrap = append(bootstrap, "127.0.0.1:"+strconv.Itoa(kafka(i)))
	}
	fmt.Printf("sluice dev: %d brokers\nbootstrap: %s\nstatus: http://127.0.0.1:%d/status\n", n, strings.Join(bootstrap, ","), http(1))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	exited := make(chan int, n)
	for i, p := range procs {
		go func(i int, p *exec.Cmd) { p.Wait(); exited <- i }(i, p)
	}
	select {
	case <-sig:
	case i := <-exited:
		fmt.Fprintf(os.Stderr, "sluice dev: broker %d exited; stopping the others\n", i+1)
	}
	stopAll(procs)
	return nil
}

// stopAll sends SIGTERM to every broker and waits (SIGKILL after 40 s).
func stopAll(procs []*exec.Cmd) {
	for _, p := range procs {
		if p.ProcessState == nil {
			p.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(40 * time.Second)
	for _, p := range procs {
		for p.ProcessState == nil && p.Process.Signal(syscall.Signal(0)) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			p.Process.Kill()
		}
	}
}
