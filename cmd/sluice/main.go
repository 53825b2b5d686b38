// Command sluice is a Kafka-compatible streaming broker.
//
//	sluice serve [--node-id N] [--listen HOST:PORT] [--controller-listen HOST:PORT]
//	             [--voters ID@HOST:PORT,...] [--data-dir DIR] [--http HOST:PORT]
//	             [--config server.properties]
//	sluice dev --brokers N [--base-port 9092] [--data-dir DIR] [--config FILE] [--s3]
//	sluice storage format --cluster-id ID (--standalone | --initial-controllers ...) [--config FILE]
//	sluice storage random-uuid
//	sluice topic|group|config|cluster|produce|consume|elect|reassign|acl|user|quota ...
//
// The admin commands are Kafka clients built on franz-go's kadm, in
// internal/admin; they take --bootstrap, --command-config, --json and
// --timeout.
//
// The flags are a contract (README.md, "Commands"): scripts outside the project
// rely on their names.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sluice-io/sluice/internal/admin"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	if admin.IsCommand(os.Args[1]) {
		os.Exit(admin.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "dev":
		err = dev(os.Args[2:])
	case "dump-log":
		err = dumpLogCmd(os.Args[2:])
	case "strays":
		err = straysCmd(os.Args[2:])
	case "storage":
		err = storageCmd(os.Args[2:])
	case "version", "--version", "-v":
		fmt.Println("sluice", buildVersion())
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "sluice: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(os.Stderr, "sluice: %s\n\n%s", ue.msg, ue.usage)
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

// version is set at build time with -ldflags "-X main.version=...". When
// it is not, buildVersion derives one from the build information.
var version = ""

// buildVersion returns version if set, else the module version and VCS
// revision the go tool stamped into the binary (runtime/debug.BuildInfo):
// "v1.2.3", or "devel 3f2a1c9d0b1e (2026-01-02T15:04:05Z, modified)" for a
// build from a checkout, or "devel (unknown revision)".
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel (no build information)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		return "devel (unknown revision, " + info.GoVersion + ")"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return fmt.Sprintf("devel %s (%s%s, %s)", rev, at, modified, info.GoVersion)
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  sluice serve [--node-id N] [--listen HOST:PORT] [--controller-listen HOST:PORT]
               [--voters ID@HOST:PORT,...] [--data-dir DIR] [--http HOST:PORT]
               [--config server.properties]
  sluice dev --brokers N [--base-port 9092] [--data-dir DIR] [--config FILE] [--s3]
  sluice dump-log --files SEGMENT.log[,...] [--print-data-log] [--offsets FROM-TO]
  sluice strays [--data-dir DIR] [--remove NAME | --remove-all]
  sluice storage format --cluster-id ID (--standalone | --initial-controllers ID@HOST:PORT:DIRID,...)
                 [--config server.properties]
  sluice storage random-uuid
  sluice version

`+admin.Usage+`
  sluice serve --help, sluice dev --help and sluice COMMAND --help describe every flag.
`)
}

// usageError is a command line that cannot be run: main prints the
// message and the usage text, and exits with status 2.
type usageError struct {
	msg   string
	usage string
}

func (e *usageError) Error() string { return e.msg }

func usageErrorf(usage, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), usage: usage}
}
