package admin

// sluice acl: Kafka's kafka-acls.sh (--add, --list, --remove) through
// kadm's CreateACLs, DescribeACLs and DeleteACLs, with kafka-acls.sh's
// flag names (AclCommand).

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclUsage is the usage text of `sluice acl`.
const aclUsage = `usage:
  sluice acl create (--allow-principal P | --deny-principal P)... --operation OP... RESOURCE...
                    [--allow-host H] [--deny-host H] [--resource-pattern-type literal|prefixed]
  sluice acl list [RESOURCE...] [--principal P] [--resource-pattern-type any|match|literal|prefixed]
  sluice acl delete RESOURCE... [--allow-principal P] [--deny-principal P] [--operation OP]
                    [--allow-host H] [--deny-host H] [--resource-pattern-type any|match|literal|prefixed]

RESOURCE is --topic T, --group G, --transactional-id ID or --cluster (each
repeatable; "*" names every resource of the type). Principals are
User:NAME; OP is one of All, Read, Write, Create, Delete, Alter, Describe,
ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite.

create adds one ACL per principal, host, operation and resource (a
principal without a host is allowed or denied from every host, "*").
list prints the ACLs of the resources given (every ACL without one);
--principal keeps those of one principal. delete removes the ACLs of the
resources that match the principals, hosts and operations given (any,
where not given). The pattern type defaults to literal (list without a
resource: any); "match" also finds the prefixed and wildcard ACLs that
apply to the names given. The broker answers SECURITY_DISABLED when it has
no authorizer (authorizer.class.name).
`

func (c *cli) aclCmd(args []string) error {
	return c.subcommand("acl", aclUsage, args, map[string]func([]string) error{
		"create": c.aclCreate,
		"list":   c.aclList,
		"delete": c.aclDelete,
	})
}

// aclFlags are kafka-acls.sh's resource, principal, host and operation
// flags.
type aclFlags struct {
	topics, groups, txnIDs             stringList
	cluster                            bool
	allow, deny, allowHosts, denyHosts stringList
	principals, ops                    stringList
	pattern                            string
}

func newACLFlags(fs *flag.FlagSet) *aclFlags {
	f := &aclFlags{}
	fs.Var(&f.topics, "topic", "topic (repeatable)")
	fs.Var(&f.groups, "group", "consumer group (repeatable)")
	fs.Var(&f.txnIDs, "transactional-id", "transactional id (repeatable)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.Var(&f.allow, "allow-principal", "principal to allow, User:NAME (repeatable)")
	fs.Var(&f.deny, "deny-principal", "principal to deny, User:NAME (repeatable)")
	fs.Var(&f.allowHosts, "allow-host", "host the allow applies to (default *)")
	fs.Var(&f.denyHosts, "deny-host", "host the deny applies to (default *)")
	fs.Var(&f.ops, "operation", "operation (repeatable)")
	fs.StringVar(&f.pattern, "resource-pattern-type", "", "literal, prefixed, any or match")
	return f
}

// hasResource reports whether a resource flag was given.
func (f *aclFlags) hasResource() bool {
	return len(f.topics)+len(f.groups)+len(f.txnIDs) > 0 || f.cluster
}

// resources adds the resource flags to b.
func (f *aclFlags) resources(b *kadm.ACLBuilder) {
	if len(f.topics) > 0 {
		b.Topics(f.topics...)
	}
	if len(f.groups) > 0 {
		b.Groups(f.groups...)
	}
	if len(f.txnIDs) > 0 {
		b.TransactionalIDs(f.txnIDs...)
	}
	if f.cluster {
		b.Clusters()
	}
}

// operations parses --operation (kafka-acls.sh's names, any case).
func (f *aclFlags) operations() ([]kadm.ACLOperation, error) {
	var out []kadm.ACLOperation
	for _, s := range f.ops {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kadm.OpUnknown {
			return nil, usageErrorf(aclUsage, "invalid --operation %q", s)
		}
		out = append(out, op)
	}
	return out, nil
}

// patternType parses --resource-pattern-type; def when not given.
func (f *aclFlags) patternType(def kadm.ACLPattern, allowed ...kadm.ACLPattern) (kadm.ACLPattern, error) {
	if f.pattern == "" {
		return def, nil
	}
	p, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err == nil {
		for _, a := range allowed {
			if p == a {
				return p, nil
			}
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = strings.ToLower(a.String())
	}
	return 0, usageErrorf(aclUsage, "invalid --resource-pattern-type %q: expected %s", f.pattern, strings.Join(names, ", "))
}

// checkPrincipals refuses a principal that is not TYPE:NAME.
func checkPrincipals(ps ...stringList) error {
	for _, l := range ps {
		for _, p := range l {
			if t, n, ok := strings.Cut(p, ":"); !ok || t == "" || n == "" {
				return usageErrorf(aclUsage, "invalid principal %q: expected User:NAME", p)
			}
		}
	}
	return nil
}

// aclInfo is one ACL in the commands' output.
type aclInfo struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
}

func newACLInfo(principal, host string, typ kmsg.ACLResourceType, name string, pat kadm.ACLPattern, op kadm.ACLOperation, perm kmsg.ACLPermissionType) aclInfo {
	return aclInfo{Principal: principal, Host: host, Operation: op.String(), Permission: perm.String(),
		ResourceType: typ.String(), ResourceName: name, PatternType: pat.String()}
}

// aclTable prints ACLs as a table.
func aclTable(w *tabwriter.Writer, acls []aclInfo) {
	fmt.Fprintln(w, "PRINCIPAL\tHOST\tOPERATION\tPERMISSION\tRESOURCE\tNAME\tPATTERN")
	for _, a := range acls {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Principal, a.Host, a.Operation, a.Permission, a.ResourceType, a.ResourceName, a.PatternType)
	}
}

func (c *cli) aclCreate(args []string) error {
	fs, o := c.newFlags("acl create", aclUsage)
	f := newACLFlags(fs)
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(aclUsage, "acl create takes no arguments")
	}
	if len(f.allow)+len(f.deny) == 0 || len(f.ops) == 0 || !f.hasResource() {
		return usageErrorf(aclUsage, "acl create needs --allow-principal or --deny-principal, --operation and a resource (--topic, --group, --transactional-id or --cluster)")
	}
	if len(f.allowHosts) > 0 && len(f.allow) == 0 || len(f.denyHosts) > 0 && len(f.deny) == 0 {
		return usageErrorf(aclUsage, "--allow-host needs --allow-principal, --deny-host needs --deny-principal")
	}
	if err := checkPrincipals(f.allow, f.deny); err != nil {
		return err
	}
	ops, err := f.operations()
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op == kadm.OpAny {
			return usageErrorf(aclUsage, "--operation Any is a filter, not an operation to allow or deny")
		}
	}
	pat, err := f.patternType(kadm.ACLPatternLiteral, kadm.ACLPatternLiteral, kadm.ACLPatternPrefixed)
	if err != nil {
		return err
	}
	b := kadm.NewACLs().MaybeAllow(f.allow...).MaybeAllowHosts(f.allowHosts...).
		MaybeDeny(f.deny...).MaybeDenyHosts(f.denyHosts...).Operations(ops...).ResourcePatternType(pat)
	f.resources(b)
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		out := struct {
			Created []aclInfo `json:"created"`
		}{Created: []aclInfo{}}
		var errs []error
		for _, r := range res {
			a := newACLInfo(r.Principal, r.Host, r.Type, r.Name, r.Pattern, r.Operation, r.Permission)
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("ACL %s %s %s on %s %s: %s", a.Permission, a.Principal, a.Operation, a.ResourceType, a.ResourceName, kafkaErr(r.Err, r.ErrMessage)))
				continue
			}
			out.Created = append(out.Created, a)
		}
		if len(out.Created) > 0 || len(errs) == 0 {
			if err := o.emit(out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "Created %d ACLs:\n", len(out.Created))
				aclTable(w, out.Created)
			}); err != nil {
				return err
			}
		}
		return joinErrs(errs)
	})
}

func (c *cli) aclList(args []string) error {
	fs, o := c.newFlags("acl list", aclUsage)
	f := newACLFlags(fs)
	fs.Var(&f.principals, "principal", "only the ACLs of this principal (repeatable)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(aclUsage, "acl list takes no arguments")
	}
	if len(f.allow)+len(f.deny)+len(f.allowHosts)+len(f.denyHosts)+len(f.ops) > 0 {
		return usageErrorf(aclUsage, "acl list filters by resource and --principal only")
	}
	if err := checkPrincipals(f.principals); err != nil {
		return err
	}
	def := kadm.ACLPatternLiteral
	if !f.hasResource() {
		def = kadm.ACLPatternAny
	}
	pat, err := f.patternType(def, kadm.ACLPatternAny, kadm.ACLPatternMatch, kadm.ACLPatternLiteral, kadm.ACLPatternPrefixed)
	if err != nil {
		return err
	}
	b := kadm.NewACLs().Allow(f.principals...).AllowHosts().Deny(f.principals...).DenyHosts().
		Operations().ResourcePatternType(pat)
	if f.hasResource() {
		f.resources(b)
	} else {
		b.AnyResource()
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		res, err := adm.DescribeACLs(ctx, b)
		if err != nil {
			return err
		}
		out := struct {
			ACLs []aclInfo `json:"acls"`
		}{ACLs: []aclInfo{}}
		seen := map[aclInfo]bool{}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("describing ACLs: %s", kafkaErr(r.Err, r.ErrMessage))
			}
			for _, d := range r.Described {
				a := newACLInfo(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
				if !seen[a] {
					seen[a] = true
					out.ACLs = append(out.ACLs, a)
				}
			}
		}
		return o.emit(out, func(w *tabwriter.Writer) { aclTable(w, out.ACLs) })
	})
}

func (c *cli) aclDelete(args []string) error {
	fs, o := c.newFlags("acl delete", aclUsage)
	f := newACLFlags(fs)
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(aclUsage, "acl delete takes no arguments")
	}
	// kafka-acls.sh --remove needs a resource too: nothing deletes every
	// ACL of the cluster by accident.
	if !f.hasResource() {
		return usageErrorf(aclUsage, "acl delete needs a resource (--topic, --group, --transactional-id or --cluster)")
	}
	if err := checkPrincipals(f.allow, f.deny); err != nil {
		return err
	}
	ops, err := f.operations()
	if err != nil {
		return err
	}
	pat, err := f.patternType(kadm.ACLPatternLiteral, kadm.ACLPatternAny, kadm.ACLPatternMatch, kadm.ACLPatternLiteral, kadm.ACLPatternPrefixed)
	if err != nil {
		return err
	}
	b := kadm.NewACLs().Operations(ops...).ResourcePatternType(pat)
	switch {
	case len(f.allow)+len(f.deny)+len(f.allowHosts)+len(f.denyHosts) == 0:
		b.Allow().AllowHosts().Deny().DenyHosts() // every principal, both permissions
	default:
		if len(f.allow)+len(f.allowHosts) > 0 {
			b.Allow(f.allow...).AllowHosts(f.allowHosts...)
		}
		if len(f.deny)+len(f.denyHosts) > 0 {
			b.Deny(f.deny...).DenyHosts(f.denyHosts...)
		}
	}
	f.resources(b)
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		res, err := adm.DeleteACLs(ctx, b)
		if err != nil {
			return err
		}
		out := struct {
			Deleted []aclInfo `json:"deleted"`
		}{Deleted: []aclInfo{}}
		var errs []error
		for _, r := range res {
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("deleting ACLs: %s", kafkaErr(r.Err, r.ErrMessage)))
				continue
			}
			for _, d := range r.Deleted {
				a := newACLInfo(d.Principal, d.Host, d.Type, d.Name, d.Pattern, d.Operation, d.Permission)
				if d.Err != nil {
					errs = append(errs, fmt.Errorf("ACL %s %s %s on %s %s: %s", a.Permission, a.Principal, a.Operation, a.ResourceType, a.ResourceName, kafkaErr(d.Err, d.ErrMessage)))
					continue
				}
				out.Deleted = append(out.Deleted, a)
			}
		}
		if err := joinErrs(errs); err != nil {
			return err
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Deleted %d ACLs.\n", len(out.Deleted))
			if len(out.Deleted) > 0 {
				aclTable(w, out.Deleted)
			}
		})
	})
}
