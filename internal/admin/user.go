package admin

// sluice user: SCRAM credentials (KIP-554), the `--entity-type users
// --add-config 'SCRAM-SHA-512=[iterations=N,password=P]'` half of
// kafka-configs.sh, through kadm's AlterUserSCRAMs and DescribeUserSCRAMs.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// userUsage is the usage text of `sluice user`.
const userUsage = `usage:
  sluice user create NAME (--password P | --password-file FILE) [--mechanism SCRAM-SHA-512] [--iterations 4096]
  sluice user list [NAME...]
  sluice user delete NAME... [--mechanism M]

create sets NAME's SCRAM credential for the mechanism (SCRAM-SHA-256 or
SCRAM-SHA-512, default SCRAM-SHA-512), replacing one it had; the client
salts the password, the broker stores only the salted form. --password-file
reads the password from the file's first line (safer than --password,
which other users may see in the process list). --iterations is Kafka's
default 4096 unless given (4096 to 16384). list names each user's
mechanisms and iterations (every user with a credential, without NAME).
delete removes the user's credentials (only --mechanism's, if given).
NAME may also be given as --entity-name NAME (kafka-configs.sh).
`

func (c *cli) userCmd(args []string) error {
	return c.subcommand("user", userUsage, args, map[string]func([]string) error{
		"create": c.userCreate,
		"list":   c.userList,
		"delete": c.userDelete,
	})
}

// scramMechanism parses a mechanism name.
func scramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, usageErrorf(userUsage, "invalid --mechanism %q: expected SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

// userResult is one user in the commands' output.
type userResult struct {
	User        string       `json:"user"`
	Credentials []credResult `json:"credentials"`
}

// credResult is one SCRAM credential of a user.
type credResult struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations,omitempty"`
}

func (c *cli) userCreate(args []string) error {
	fs, o := c.newFlags("user create", userUsage)
	o.posFlag(fs, "entity-name")
	mech := fs.String("mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	password := fs.String("password", "", "the password")
	passwordFile := fs.String("password-file", "", "a file whose first line is the password")
	iterations := fs.Int("iterations", 4096, "SCRAM iterations (4096 to 16384)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageErrorf(userUsage, "user create takes one user name, got %d", len(pos))
	}
	m, err := scramMechanism(*mech)
	if err != nil {
		return err
	}
	if (*password == "") == (*passwordFile == "") {
		return usageErrorf(userUsage, "user create needs --password or --password-file (one of them)")
	}
	// The range of Kafka's ScramMechanism (minIterations 4096,
	// maxIterations 16384).
	if *iterations < 4096 || *iterations > 16384 {
		return usageErrorf(userUsage, "--iterations must be between 4096 and 16384")
	}
	pass := *password
	if *passwordFile != "" {
		b, err := os.ReadFile(*passwordFile)
		if err != nil {
			return fmt.Errorf("--password-file: %v", err)
		}
		pass, _, _ = strings.Cut(string(b), "\n")
		pass = strings.TrimSuffix(pass, "\r")
		if pass == "" {
			return fmt.Errorf("--password-file %s: the first line is empty", *passwordFile)
		}
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: pos[0], Mechanism: m, Iterations: int32(*iterations), Password: pass}})
		if err != nil {
			return err
		}
		if r := res[pos[0]]; r.Err != nil {
			return fmt.Errorf("user %s: %s", pos[0], kafkaErr(r.Err, r.ErrMessage))
		}
		out := userResult{User: pos[0], Credentials: []credResult{{Mechanism: m.String(), Iterations: int32(*iterations)}}}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Set the %s credential of user %s (%d iterations).\n", m, pos[0], *iterations)
		})
	})
}

func (c *cli) userList(args []string) error {
	fs, o := c.newFlags("user list", userUsage)
	o.posFlag(fs, "entity-name")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		desc, err := adm.DescribeUserSCRAMs(ctx, pos...)
		if err != nil {
			return err
		}
		out := struct {
			Users []userResult `json:"users"`
		}{Users: []userResult{}}
		var errs []error
		for _, d := range desc.Sorted() {
			if d.Err != nil {
				if errors.Is(d.Err, kerr.ResourceNotFound) {
					errs = append(errs, fmt.Errorf("user %s has no SCRAM credentials", d.User))
				} else {
					errs = append(errs, fmt.Errorf("user %s: %s", d.User, kafkaErr(d.Err, d.ErrMessage)))
				}
				continue
			}
			u := userResult{User: d.User, Credentials: []credResult{}}
			for _, ci := range d.CredInfos {
				u.Credentials = append(u.Credentials, credResult{Mechanism: ci.Mechanism.String(), Iterations: ci.Iterations})
			}
			out.Users = append(out.Users, u)
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
			for _, u := range out.Users {
				for _, ci := range u.Credentials {
					fmt.Fprintf(w, "%s\t%s\t%d\n", u.User, ci.Mechanism, ci.Iterations)
				}
			}
		}); err != nil {
			return err
		}
		return joinErrs(errs)
	})
}

func (c *cli) userDelete(args []string) error {
	fs, o := c.newFlags("user delete", userUsage)
	o.posFlag(fs, "entity-name")
	mech := fs.String("mechanism", "", "only this mechanism's credential")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(userUsage, "user delete takes one or more user names")
	}
	var only kadm.ScramMechanism
	if *mech != "" {
		if only, err = scramMechanism(*mech); err != nil {
			return err
		}
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		// The mechanisms each user has (a deletion names one).
		desc, err := adm.DescribeUserSCRAMs(ctx, pos...)
		if err != nil {
			return err
		}
		var dels []kadm.DeleteSCRAM
		out := struct {
			Deleted []userResult `json:"deleted"`
		}{Deleted: []userResult{}}
		var errs []error
		for _, u := range pos {
			d := desc[u]
			if errors.Is(d.Err, kerr.ResourceNotFound) {
				errs = append(errs, fmt.Errorf("user %s has no SCRAM credentials", u))
				continue
			}
			if d.Err != nil {
				errs = append(errs, fmt.Errorf("user %s: %s", u, kafkaErr(d.Err, d.ErrMessage)))
				continue
			}
			r := userResult{User: u, Credentials: []credResult{}}
			for _, ci := range d.CredInfos {
				if only == 0 || ci.Mechanism == only {
					dels = append(dels, kadm.DeleteSCRAM{User: u, Mechanism: ci.Mechanism})
					r.Credentials = append(r.Credentials, credResult{Mechanism: ci.Mechanism.String()})
				}
			}
			if len(r.Credentials) == 0 {
				errs = append(errs, fmt.Errorf("user %s has no %s credential", u, only))
				continue
			}
			out.Deleted = append(out.Deleted, r)
		}
		if len(dels) > 0 {
			res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
			if err != nil {
				return err
			}
			for _, r := range res.Sorted() {
				if r.Err != nil {
					errs = append(errs, fmt.Errorf("user %s: %s", r.User, kafkaErr(r.Err, r.ErrMessage)))
				}
			}
		}
		if err := joinErrs(errs); err != nil {
			return err
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			for _, r := range out.Deleted {
				ms := make([]string, len(r.Credentials))
				for i, ci := range r.Credentials {
					ms[i] = ci.Mechanism
				}
				fmt.Fprintf(w, "Deleted the %s credentials of user %s.\n", strings.Join(ms, " and "), r.User)
			}
		})
	})
}
