package admin

// sluice quota: client quotas (KIP-546), the `--entity-type users|clients|ips`
// half of kafka-configs.sh (--user, --client, --ip and their -defaults
// forms), through kadm's AlterClientQuotas and DescribeClientQuotas.

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaUsage is the usage text of `sluice quota`.
const quotaUsage = `usage:
  sluice quota set ENTITY key=value... [--add-config k=v,k2=v2]
  sluice quota get [ENTITY]
  sluice quota delete ENTITY [key...] [--delete-config k,k2]

ENTITY is kafka-configs.sh's:
  --user NAME | --user-defaults         a user principal's name, or every user's default
  --client ID | --client-defaults       a client id, or every client's default
  --ip ADDR | --ip-defaults             a client address (connection_creation_rate only;
                                        a sluice broker refuses address quotas)
--user and --client together name the quota of that user with that client id.

The keys are Kafka's: producer_byte_rate, consumer_byte_rate (bytes per
second), request_percentage (percent of a request handler thread),
controller_mutation_rate (partition mutations per second) for users and
clients; connection_creation_rate for addresses. set changes the keys
given (the others keep their values); delete removes the keys given (every
quota of the entity without keys). get without ENTITY lists every entity
with a quota; with one, that entity's quotas exactly.
`

func (c *cli) quotaCmd(args []string) error {
	return c.subcommand("quota", quotaUsage, args, map[string]func([]string) error{
		"set":    c.quotaSet,
		"get":    c.quotaGet,
		"delete": c.quotaDelete,
	})
}

// quotaEntityFlags are the ENTITY flags.
type quotaEntityFlags struct {
	user, client, ip                   string
	userDefault, clientDefault, ipDflt bool
}

func newQuotaEntityFlags(fs *flag.FlagSet) *quotaEntityFlags {
	f := &quotaEntityFlags{}
	fs.StringVar(&f.user, "user", "", "user principal name")
	fs.BoolVar(&f.userDefault, "user-defaults", false, "every user's default")
	fs.StringVar(&f.client, "client", "", "client id")
	fs.BoolVar(&f.clientDefault, "client-defaults", false, "every client's default")
	fs.StringVar(&f.ip, "ip", "", "client address")
	fs.BoolVar(&f.ipDflt, "ip-defaults", false, "every address's default")
	return f
}

// entity returns the entity the flags name (empty if none).
func (f *quotaEntityFlags) entity() (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	add := func(typ, name string, dflt bool, flagName string) error {
		switch {
		case name != "" && dflt:
			return usageErrorf(quotaUsage, "--%s and --%s-defaults exclude each other", flagName, flagName)
		case name != "":
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ, Name: kadm.StringPtr(name)})
		case dflt:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ})
		}
		return nil
	}
	if err := add("user", f.user, f.userDefault, "user"); err != nil {
		return nil, err
	}
	if err := add("client-id", f.client, f.clientDefault, "client"); err != nil {
		return nil, err
	}
	if err := add("ip", f.ip, f.ipDflt, "ip"); err != nil {
		return nil, err
	}
	for _, c := range e {
		if c.Type == "ip" && len(e) > 1 {
			return nil, usageErrorf(quotaUsage, "an address quota (--ip) cannot be combined with --user or --client")
		}
	}
	return e, nil
}

// entityMap is an entity in the JSON output: type → name (null for the
// default).
func entityMap(e kadm.ClientQuotaEntity) map[string]*string {
	m := map[string]*string{}
	for _, c := range e {
		m[c.Type] = c.Name
	}
	return m
}

// quotaResult is one entity's quotas in the commands' output.
type quotaResult struct {
	Entity map[string]*string `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// formatQuota prints a quota value as Kafka does: integers without a
// fraction.
func formatQuota(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// quotaEntityArgs parses the flags common to set and delete.
func (c *cli) quotaEntityArgs(name string, args []string, flagName string, list func(*stringList) flag.Value) (*adminOpts, kadm.ClientQuotaEntity, []string, error) {
	fs, o := c.newFlags(name, quotaUsage)
	ef := newQuotaEntityFlags(fs)
	fs.Var(list(&o.named), flagName, "kafka-configs.sh's form of the arguments")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return nil, nil, nil, err
	}
	e, err := ef.entity()
	if err != nil {
		return nil, nil, nil, err
	}
	if len(e) == 0 {
		return nil, nil, nil, usageErrorf(quotaUsage, "%s needs an entity (--user, --client, --ip or their -defaults forms)", name)
	}
	return o, e, pos, nil
}

func (c *cli) quotaSet(args []string) error {
	o, e, pos, err := c.quotaEntityArgs("quota set", args, "add-config", func(l *stringList) flag.Value { return addConfigList{l} })
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(quotaUsage, "quota set needs one or more key=value")
	}
	kv, order, err := parseKV(quotaUsage, pos)
	if err != nil {
		return err
	}
	out := quotaResult{Entity: entityMap(e), Values: map[string]float64{}}
	var ops []kadm.AlterClientQuotaOp
	for _, k := range order {
		v, err := strconv.ParseFloat(strings.TrimSpace(kv[k]), 64)
		if err != nil {
			return usageErrorf(quotaUsage, "invalid value %q for %s: expected a number", kv[k], k)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
		out.Values[k] = v
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		if err := alterQuotas(ctx, adm, e, ops); err != nil {
			return err
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Updated the quotas of %s:", entityString(e))
			for _, k := range order {
				fmt.Fprintf(w, " %s=%s", k, formatQuota(out.Values[k]))
			}
			fmt.Fprintln(w, ".")
		})
	})
}

// alterQuotas sends one AlterClientQuotas entry.
func alterQuotas(ctx context.Context, adm *kadm.Client, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("quotas of %s: %s", entityString(e), kafkaErr(r.Err, r.ErrMessage))
		}
	}
	return nil
}

// entityString names an entity in messages: "user alice, client-id app".
func entityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, len(e))
	for i, c := range e {
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		parts[i] = c.Type + " " + name
	}
	return strings.Join(parts, ", ")
}

// describeQuotas returns the quotas of exactly e (every entity if e is
// empty), sorted.
func describeQuotas(ctx context.Context, adm *kadm.Client, e kadm.ClientQuotaEntity) ([]quotaResult, error) {
	var comps []kadm.DescribeClientQuotaComponent
	for _, c := range e {
		dc := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: kmsg.QuotasMatchTypeExact}
		if c.Name == nil {
			dc.MatchType = kmsg.QuotasMatchTypeDefault
		}
		comps = append(comps, dc)
	}
	qs, err := adm.DescribeClientQuotas(ctx, len(e) > 0, comps)
	if err != nil {
		return nil, err
	}
	out := []quotaResult{}
	for _, q := range qs {
		r := quotaResult{Entity: entityMap(q.Entity), Values: map[string]float64{}}
		for _, v := range q.Values {
			r.Values[v.Key] = v.Value
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return entityKey(out[i].Entity) < entityKey(out[j].Entity) })
	return out, nil
}

// entityKey orders entities: by type, then name, defaults first.
func entityKey(m map[string]*string) string {
	var parts []string
	for _, t := range sortedKeys(m) {
		name := "\x00"
		if m[t] != nil {
			name = "\x01" + *m[t]
		}
		parts = append(parts, t+"="+name)
	}
	return strings.Join(parts, ",")
}

func (c *cli) quotaGet(args []string) error {
	fs, o := c.newFlags("quota get", quotaUsage)
	ef := newQuotaEntityFlags(fs)
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(quotaUsage, "quota get takes no arguments")
	}
	e, err := ef.entity()
	if err != nil {
		return err
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		qs, err := describeQuotas(ctx, adm, e)
		if err != nil {
			return err
		}
		out := struct {
			Quotas []quotaResult `json:"quotas"`
		}{qs}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "USER\tCLIENT-ID\tIP\tQUOTA\tVALUE")
			for _, q := range qs {
				col := func(t string) string {
					n, ok := q.Entity[t]
					switch {
					case !ok:
						return "-"
					case n == nil:
						return "<default>"
					}
					return *n
				}
				for _, k := range sortedKeys(q.Values) {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", col("user"), col("client-id"), col("ip"), k, formatQuota(q.Values[k]))
				}
			}
		})
	})
}

func (c *cli) quotaDelete(args []string) error {
	o, e, pos, err := c.quotaEntityArgs("quota delete", args, "delete-config", func(l *stringList) flag.Value { return commaList{l} })
	if err != nil {
		return err
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		keys := pos
		if len(keys) == 0 {
			qs, err := describeQuotas(ctx, adm, e)
			if err != nil {
				return err
			}
			for _, q := range qs {
				keys = append(keys, sortedKeys(q.Values)...)
			}
			if len(keys) == 0 {
				return fmt.Errorf("%s has no quotas", entityString(e))
			}
		}
		var ops []kadm.AlterClientQuotaOp
		for _, k := range keys {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
		}
		if err := alterQuotas(ctx, adm, e, ops); err != nil {
			return err
		}
		out := struct {
			Entity  map[string]*string `json:"entity"`
			Deleted []string           `json:"deleted"`
		}{entityMap(e), keys}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Deleted the quotas %s of %s.\n", strings.Join(keys, ", "), entityString(e))
		})
	})
}
