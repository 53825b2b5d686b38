package admin

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Usage lists the admin commands, for the sluice binary's usage text.
const Usage = `admin commands (Kafka clients; docs/operations.md):
  sluice topic create|list|describe|alter|add-partitions|delete ...
  sluice group list|describe|reset-offsets|delete ...
  sluice share-group list|describe|reset-offsets ...
  sluice config get|set ...
  sluice cluster status|decommission|unregister ...
  sluice quorum describe|add-controller|remove-controller ...
  sluice feature describe|upgrade ...
  sluice produce --topic T [--key-separator SEP] [--acks all|1|0]
  sluice consume --topic T [--from-beginning] [--group G] [--max-messages N] [--print-key]
  sluice elect --topic T [--partition P] [--type preferred|unclean]
  sluice elect --all-topic-partitions [--type preferred|unclean]
  sluice reassign plan|execute|status|cancel ...
  sluice txn list|describe|producers|abort ...
  sluice acl create|list|delete ...
  sluice user create|list|delete ...
  sluice quota set|get|delete ...
  each takes [--bootstrap HOST:PORT,...] [--command-config FILE] [--json] [--timeout 30s]
  (--bootstrap-server is the same flag)
`

// cli is one run of an admin command: where it reads its input and
// writes its results and messages.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// commands maps each admin command's name to its handler.
func (c *cli) commands() map[string]func([]string) error {
	return map[string]func([]string) error{
		"topic":       c.topicCmd,
		"group":       c.groupCmd,
		"share-group": c.shareGroupCmd,
		"produce":     c.produceCmd,
		"consume":     c.consumeCmd,
		"config":      c.configCmd,
		"elect":       c.electCmd,
		"reassign":    c.reassignCmd,
		"txn":         c.txnCmd,
		"cluster":     c.clusterCmd,
		"quorum":      c.quorumCmd,
		"feature":     c.featureCmd,
		"acl":         c.aclCmd,
		"user":        c.userCmd,
		"quota":       c.quotaCmd,
	}
}

// IsCommand reports whether name is an admin command Run runs.
func IsCommand(name string) bool {
	_, ok := (&cli{}).commands()[name]
	return ok
}

// Run runs the admin command args[0] with the arguments args[1:], reading
// stdin (produce, reassign) and writing its results to stdout and its
// messages to stderr, and returns the process's exit status: 0 on success
// (and for --help), 1 when the command failed, 2 for a command line that
// cannot be run (the message and the command's usage on stderr).
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		fmt.Fprint(stderr, "sluice: missing command\n\n", Usage)
		return 2
	}
	fn, ok := c.commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sluice: unknown command %q\n\n%s", args[0], Usage)
		return 2
	}
	err := fn(args[1:])
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "sluice: %s\n\n%s\n%s", ue.msg, ue.usage, commonUsage)
		return 2
	case errors.Is(err, flag.ErrHelp):
		return 0 // --help: usage printed
	case err != nil:
		fmt.Fprintln(stderr, "sluice:", err)
		return 1
	}
	return 0
}
