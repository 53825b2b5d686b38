package node

import (
	"fmt"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metaprops"
)

// ApplyFormat reads the quorum a data directory was formatted with
// (`sluice storage format`, metaprops.BootstrapFile). A node given no
// --voters (controller.quorum.voters) takes the formatted voters, as if
// they had been given; its quorum then takes the formatted cluster id
// (Start passes it to the controller). nil without a formatted quorum.
// `serve` calls it before checking process.roles against the voters;
// Start calls it again (a second call finds the voters set).
func ApplyFormat(cfg *config.Broker) (*metaprops.Bootstrap, error) {
	b, found, err := metaprops.ReadBootstrap(cfg.DataDir)
	if err != nil || !found {
		return nil, err
	}
	if len(cfg.Voters) == 0 {
		if cfg.Voters, err = config.ParseVoters(b.Voters); err != nil {
			return nil, fmt.Errorf("%s: controller.quorum.voters=%s: %w", metaprops.BootstrapFile, b.Voters, err)
		}
	}
	return &b, nil
}
