// Command sluice is a Kafka-compatible streaming broker.
//
//	sluice serve [--node-id N] [--listen HOST:PORT] [--controller-listen HOST:PORT]
//	             [--voters ID@HOST:PORT,...] [--data-dir DIR] [--http HOST:PORT]
//	             [--config server.properties]
//	sluice dev --brokers N [--base-port 9092] [--data-dir DIR] [--config FILE]
//
// The flags are a contract (see DESIGN.md): scripts outside the project
// rely on their names.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "dev":
		err = dev(os.Args[2:])
	case "version", "--version", "-v":
		fmt.Println("sluice", version)
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "sluice: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // --help: usage printed, exit 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  sluice serve [--node-id N] [--listen HOST:PORT] [--controller-listen HOST:PORT]
               [--voters ID@HOST:PORT,...] [--data-dir DIR] [--http HOST:PORT]
               [--config server.properties]
  sluice dev --brokers N [--base-port 9092] [--data-dir DIR] [--config FILE]
  sluice version

  sluice serve --help and sluice dev --help describe every flag.
`)
}
