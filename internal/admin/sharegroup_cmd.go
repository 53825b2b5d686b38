package admin

// shareGroupUsage is the usage text of `sluice share-group`.
const shareGroupUsage = `usage:
  sluice share-group reset-offsets ID --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N) [--execute]
` + "\n" + shareResetUsage

// shareGroupCmd runs `sluice share-group` (kafka-share-groups.sh).
func (c *cli) shareGroupCmd(args []string) error {
	return c.subcommand("share-group", shareGroupUsage, args, map[string]func([]string) error{
		"reset-offsets": c.shareGroupResetOffsets,
	})
}
