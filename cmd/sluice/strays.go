package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/vfs"
)

const straysUsage = `usage: sluice strays [--data-dir DIR] [--json] [--remove NAME ... | --remove-all]

Lists the stray partition directories of a node's data directory: the
partition directories the cluster's metadata did not know (a topic deleted
or a replica moved away while the node was down, or a topic of the same
name with another id), which sluice renames aside as topic-N.ID-stray and
never deletes (docs/operations.md, "Cluster identity and stray replicas").
--remove deletes the named strays, --remove-all every one; nothing else in
the directory is touched. It reads the directory directly and works on a
running or a stopped node (the node never touches a stray again).

flags:
`

// straysCmd implements sluice strays.
func straysCmd(args []string) error {
	fs := flag.NewFlagSet("strays", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), straysUsage)
		fs.PrintDefaults()
	}
	dir := fs.String("data-dir", "./sluice-data", "the node's data directory (log.dirs)")
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("remove-all", false, "delete every stray partition directory")
	var remove []string
	fs.Func("remove", "delete the stray partition directory `NAME` (repeatable)", func(v string) error {
		remove = append(remove, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *all && len(remove) > 0 {
		return usageErrorf(straysUsage, "strays takes no arguments, and --remove or --remove-all, not both")
	}
	if _, err := os.Stat(*dir); err != nil {
		return err
	}
	strays, err := broker.ListStrays(vfs.Default, *dir)
	if err != nil {
		return err
	}
	if *all {
		for _, s := range strays {
			remove = append(remove, s.Name)
		}
	}
	if len(remove) > 0 {
		for _, name := range remove {
			if err := broker.RemoveStray(vfs.Default, *dir, name); err != nil {
				return err
			}
			fmt.Printf("removed %s\n", name)
		}
		return nil
	}
	if strays == nil {
		strays = []broker.Stray{}
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(strays)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "STRAY\tBYTES")
	for _, s := range strays {
		fmt.Fprintf(w, "%s\t%d\n", s.Name, s.Bytes)
	}
	return w.Flush()
}
