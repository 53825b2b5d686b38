// Package admin holds sluice's admin commands (topic, group, config,
// cluster, quorum, feature, produce, consume, elect, reassign, txn, acl,
// user, quota). They are Kafka clients: every request goes through franz-go
// (kgo, and kadm for the admin APIs), so they work against any
// Kafka-compatible cluster, sluice or Kafka. cmd/sluice hands them their command line through Run.
//
// This file holds what they share: the common flags (--bootstrap,
// --command-config, --json, --timeout), flag parsing with flags after
// positional arguments, the connection (adminOpts.run), usage errors (exit
// status 2) and output.
package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// commonUsage describes the flags every admin command takes.
const commonUsage = `common flags (every admin command):
  --bootstrap HOST:PORT[,HOST:PORT...]  brokers to start from (default 127.0.0.1:9092);
                                        --bootstrap-server is the same flag (Kafka's name)
  --command-config FILE                 Kafka client properties: security.protocol, sasl.*, ssl.*
  --json                                one JSON document on standard output instead of a table
  --timeout DURATION                    bound on the requests (default 30s)
`

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

// adminOpts are the flags every admin command takes.
type adminOpts struct {
	bootstrap     string
	commandConfig string
	json          bool
	timeout       time.Duration
	usage         string
	// cl is run's client, for the requests kadm does not wrap.
	cl *kgo.Client
	// clientOpts are further client options (produce's and consume's).
	clientOpts []kgo.Opt
	// streaming leaves the context run passes on unbounded by --timeout
	// (only the connection is bounded): produce and consume run as long
	// as their input or records last.
	streaming bool
	// named are the positional arguments given by a flag (posFlag).
	named stringList
	*cli
}

// newFlags returns a flag set for an admin command with the common flags
// registered; usage is the command's usage text.
func (c *cli) newFlags(name, usage string) (*flag.FlagSet, *adminOpts) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &adminOpts{usage: usage, cli: c}
	fs.StringVar(&o.bootstrap, "bootstrap", "127.0.0.1:9092", "brokers to start from")
	fs.StringVar(&o.bootstrap, "bootstrap-server", "127.0.0.1:9092", "--bootstrap (Kafka's name)")
	fs.StringVar(&o.commandConfig, "command-config", "", "Kafka client properties file")
	fs.BoolVar(&o.json, "json", false, "JSON output")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound on the requests")
	return fs, o
}

// parseFlags parses args allowing flags after positional arguments
// (`topic create NAME --partitions 3`); "--" ends the flags. It returns
// the positional arguments. --help prints the usage and returns
// flag.ErrHelp; any other parse error is a usage error.
func (o *adminOpts) parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(o.stderr, o.usage, "\n", commonUsage)
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, usageErrorf(o.usage, "%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	pos = append(pos, o.named...)
	if o.timeout <= 0 {
		return nil, usageErrorf(o.usage, "invalid value %v for --timeout: expected a positive duration", o.timeout)
	}
	return pos, nil
}

// posFlag registers --name (repeatable) as another way to give the
// command's positional arguments, as Kafka's tools name them: --topic T for
// `topic create T`, --group G for `group describe G`. parseFlags appends
// them to the positional arguments.
func (o *adminOpts) posFlag(fs *flag.FlagSet, name string) {
	fs.Var(&o.named, name, "the positional argument, as Kafka's tools name it (repeatable)")
}

// seeds splits --bootstrap.
func (o *adminOpts) seeds() []string {
	var out []string
	for _, s := range strings.Split(o.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// connect returns a client of the cluster behind --bootstrap, after one
// Metadata round trip: a cluster that cannot be reached is an error
// ("cannot reach bootstrap ...") before any command runs.
func (o *adminOpts) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	seeds := o.seeds()
	if len(seeds) == 0 {
		return nil, nil, usageErrorf(o.usage, "--bootstrap is empty")
	}
	sec, err := loadCommandConfig(o.commandConfig)
	if err != nil {
		return nil, nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("sluice-cli"),
		kgo.DialTimeout(min(10*time.Second, o.timeout)),
		kgo.RetryTimeout(o.timeout),
	}
	opts = append(opts, sec...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("cannot reach bootstrap %s: %v", o.bootstrap, err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(o.timeout, time.Hour).Milliseconds()))
	return cl, adm, nil
}

// emit writes v as one indented JSON document with --json, or calls table
// with a tabwriter on stdout otherwise.
func (o *adminOpts) emit(v any, table func(w *tabwriter.Writer)) error {
	if o.json {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(o.stdout, 0, 0, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// stringList is a repeatable flag (--config k=v --config k2=v2).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds one value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// parseKV parses k=v pairs (Kafka's --add-config items).
func parseKV(usage string, items []string) (map[string]string, []string, error) {
	m := map[string]string{}
	var order []string
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, nil, usageErrorf(usage, "invalid config %q: expected key=value", it)
		}
		if _, dup := m[k]; dup {
			return nil, nil, usageErrorf(usage, "config %s given twice", k)
		}
		m[k] = v
		order = append(order, k)
	}
	return m, order, nil
}

// addConfigList is a repeatable flag taking kafka-configs.sh's
// --add-config format: k=v pairs separated by commas, a value with commas
// in square brackets (k1=v1,k2=[a,b]); the brackets are dropped, as
// Kafka's ConfigCommand.parseConfigsToBeAdded drops them.
type addConfigList struct{ items *stringList }

func (l addConfigList) String() string {
	if l.items == nil {
		return ""
	}
	return l.items.String()
}

// Set adds the pairs of one --add-config.
func (l addConfigList) Set(v string) error {
	depth, start := 0, 0
	add := func(it string) {
		if k, val, ok := strings.Cut(it, "="); ok && strings.HasPrefix(val, "[") && strings.HasSuffix(val, "]") {
			it = k + "=" + val[1:len(val)-1]
		}
		if strings.TrimSpace(it) != "" {
			*l.items = append(*l.items, it)
		}
	}
	for i, r := range v {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				add(v[start:i])
				start = i + 1
			}
		}
	}
	add(v[start:])
	return nil
}

// commaList is a repeatable flag whose values may also be comma-separated
// lists (kafka-configs.sh --delete-config k1,k2).
type commaList struct{ items *stringList }

func (l commaList) String() string {
	if l.items == nil {
		return ""
	}
	return l.items.String()
}

// Set adds the names of one value.
func (l commaList) Set(v string) error {
	*l.items = append(*l.items, splitList(v)...)
	return nil
}

// parseInt32List parses "1,2,3".
func parseInt32List(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ints formats broker ids as "1,2,3" (Kafka's kafka-topics style).
func ints(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// topicID formats a topic id as Kafka prints a Uuid (URL-safe base64, no
// padding); "" for the zero id.
func topicID(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// kafkaErr describes a per-resource error: the error and the broker's
// message, if any (a message that already starts with the error, as
// sluice's controller errors do, is printed alone).
func kafkaErr(err error, msg string) string {
	if msg != "" && strings.HasPrefix(msg, err.Error()) {
		return msg
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		return err.Error() + ": " + msg
	}
	return err.Error()
}

// topicErr turns a per-topic error into the message the commands print:
// "topic X does not exist" for UNKNOWN_TOPIC_OR_PARTITION and
// UNKNOWN_TOPIC_ID, else the error and the broker's message.
func topicErr(topic string, err error, msg string) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		return fmt.Errorf("topic %s does not exist", topic)
	}
	return fmt.Errorf("topic %s: %s", topic, kafkaErr(err, msg))
}

// requireTopics checks that every topic exists (one Metadata request) and
// returns their details.
func requireTopics(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.TopicDetails, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		d, ok := md.Topics[t]
		if !ok {
			return nil, fmt.Errorf("topic %s does not exist", t)
		}
		if d.Err != nil {
			return nil, topicErr(t, d.Err, "")
		}
	}
	return md.Topics, nil
}

// requireTopicsWithin is requireTopics bounded by --timeout (for the
// streaming commands, whose ctx is not).
func requireTopicsWithin(ctx context.Context, o *adminOpts, adm *kadm.Client, topics ...string) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	_, err := requireTopics(ctx, adm, topics...)
	return err
}

// joinErrs combines per-resource failures into one error (nil if none).
func joinErrs(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// subcommand dispatches args[0] of a command group (topic, group, ...)
// to its handler; a missing or unknown subcommand is a usage error.
func (c *cli) subcommand(group, usage string, args []string, cmds map[string]func([]string) error) error {
	if len(args) == 0 {
		return usageErrorf(usage, "sluice %s: missing subcommand", group)
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(c.stderr, usage, "\n", commonUsage)
		return flag.ErrHelp
	}
	fn, ok := cmds[args[0]]
	if !ok {
		return usageErrorf(usage, "sluice %s: unknown subcommand %q", group, args[0])
	}
	return fn(args[1:])
}

// runAdmin is an admin command's common course: parse args with fs (o's
// flags), check the positional arguments (check may be nil), and run fn
// connected (adminOpts.run).
func runAdmin(fs *flag.FlagSet, o *adminOpts, args []string, check func(pos []string) error,
	fn func(ctx context.Context, adm *kadm.Client, pos []string) error) error {
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(pos); err != nil {
			return err
		}
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		return fn(ctx, adm, pos)
	})
}

// run is every admin command's connection: a context cancelled by SIGINT
// or SIGTERM and bounded by --timeout (unless o.streaming), a client of
// the cluster behind --bootstrap with --command-config's settings and
// o.clientOpts (connect), and fn run with them; the client is closed when
// fn returns.
func (o *adminOpts) run(fn func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cl, adm, err := o.connect(cctx, o.clientOpts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	o.cl = cl
	if o.streaming {
		return fn(ctx, cl, adm)
	}
	return fn(cctx, cl, adm)
}

// noArgs is runAdmin's check for a command that takes no positional
// arguments.
func noArgs(usage, name string) func([]string) error {
	return func(pos []string) error {
		if len(pos) != 0 {
			return usageErrorf(usage, "%s takes no arguments", name)
		}
		return nil
	}
}
