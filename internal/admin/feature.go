package admin

// sluice feature: Kafka's kafka-features.sh (KIP-584): the feature levels
// each broker supports and the cluster's finalized ones, and raising a
// level after a rolling upgrade, on kadm's ApiVersions and UpdateFeatures.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

// featureUsage is the usage text of `sluice feature`.
const featureUsage = `usage:
  sluice feature describe
  sluice feature upgrade --feature NAME=LEVEL[,NAME=LEVEL...] [--dry-run]

describe lists each feature with the levels every broker supports and the
level finalized for the cluster. upgrade finalizes new levels, all or none;
the controller refuses a level some registered broker does not support
(finish the rolling upgrade first). kraft.version 1 enables dynamic
controller voters (sluice quorum). docs/operations.md, "Rolling upgrade".
`

func (c *cli) featureCmd(args []string) error {
	return c.subcommand("feature", featureUsage, args, map[string]func([]string) error{
		"describe": c.featureDescribe,
		"upgrade":  c.featureUpgrade,
	})
}

func (c *cli) featureDescribe(args []string) error {
	fs, o := c.newFlags("feature describe", featureUsage)
	return runAdmin(fs, o, args, noArgs(featureUsage, "feature describe"), func(ctx context.Context, adm *kadm.Client, _ []string) error {
		vs, err := adm.ApiVersions(ctx)
		if err != nil {
			return err
		}
		type feature struct {
			Name      string `json:"feature"`
			Supported string `json:"supported"` // min-max of every broker that answered
			Finalized int16  `json:"finalized"`
			Epoch     int64  `json:"epoch"`
		}
		byName := map[string]*feature{}
		lo, hi := map[string]int16{}, map[string]int16{}
		for _, b := range vs.Sorted() {
			if b.Err != nil {
				return fmt.Errorf("broker %d: %w", b.NodeID, b.Err)
			}
			raw := b.Raw()
			for _, sf := range raw.SupportedFeatures {
				f := byName[sf.Name]
				if f == nil {
					f = &feature{Name: sf.Name}
					byName[sf.Name] = f
					lo[sf.Name], hi[sf.Name] = sf.MinVersion, sf.MaxVersion
				}
				lo[sf.Name], hi[sf.Name] = max(lo[sf.Name], sf.MinVersion), min(hi[sf.Name], sf.MaxVersion)
			}
			for _, ff := range raw.FinalizedFeatures {
				if f := byName[ff.Name]; f != nil && raw.FinalizedFeaturesEpoch >= f.Epoch {
					f.Finalized, f.Epoch = ff.MaxVersionLevel, raw.FinalizedFeaturesEpoch
				}
			}
		}
		out := struct {
			Features []feature `json:"features"`
		}{Features: []feature{}}
		for name, f := range byName {
			f.Supported = fmt.Sprintf("%d-%d", lo[name], hi[name])
			out.Features = append(out.Features, *f)
		}
		sort.Slice(out.Features, func(i, j int) bool { return out.Features[i].Name < out.Features[j].Name })
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "FEATURE\tSUPPORTED\tFINALIZED\tEPOCH")
			for _, f := range out.Features {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", f.Name, f.Supported, f.Finalized, f.Epoch)
			}
		})
	})
}

func (c *cli) featureUpgrade(args []string) error {
	fs, o := c.newFlags("feature upgrade", featureUsage)
	spec := fs.String("feature", "", "NAME=LEVEL[,NAME=LEVEL...]")
	dry := fs.Bool("dry-run", false, "validate only")
	var updates []kadm.FeatureUpdate
	check := func(pos []string) error {
		if len(pos) != 0 || *spec == "" {
			return usageErrorf(featureUsage, "feature upgrade needs --feature NAME=LEVEL and no arguments")
		}
		for _, e := range strings.Split(*spec, ",") {
			name, lvl, ok := strings.Cut(strings.TrimSpace(e), "=")
			n, err := strconv.ParseInt(lvl, 10, 16)
			if !ok || name == "" || err != nil || n < 0 {
				return usageErrorf(featureUsage, "--feature: %q is not NAME=LEVEL", e)
			}
			updates = append(updates, kadm.FeatureUpdate{Feature: name, MaxVersionLevel: int16(n), UpgradeType: 1})
		}
		return nil
	}
	return runAdmin(fs, o, args, check, func(ctx context.Context, adm *kadm.Client, _ []string) error {
		res, err := adm.UpdateFeatures(ctx, *dry, updates...)
		if err != nil {
			return err
		}
		if err := res.Error(); err != nil {
			return err
		}
		type result struct {
			Feature string `json:"feature"`
			Level   int16  `json:"level"`
		}
		out := struct {
			Results []result `json:"results"`
			DryRun  bool     `json:"dry_run"`
		}{DryRun: *dry}
		for _, u := range updates {
			out.Results = append(out.Results, result{u.Feature, u.MaxVersionLevel})
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			verb := "finalized at"
			if *dry {
				verb = "can be finalized at"
			}
			for _, r := range out.Results {
				fmt.Fprintf(w, "%s %s %d\n", r.Feature, verb, r.Level)
			}
		})
	})
}
