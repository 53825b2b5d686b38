// Command kfake-serve runs franz-go's in-memory fake broker (kfake) on one
// port until interrupted: the baseline that sluice's CPU per record is
// measured against (scripts/bench-cpu.sh, docs/performance.md). It lives in
// its own module so that sluice itself does not depend on kfake.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 9092, "port to listen on (127.0.0.1)")
	flag.Parse()
	c, err := kfake.NewCluster(kfake.Ports(*port), kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	fmt.Println("kfake serving on", c.ListenAddrs())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Close()
}
