package window

import (
	"errors"
	"fmt"
	"maps"
)

// Reconfigure takes the parts of cfg that come from the fleet file and
// may change while the Features runs (a live fleet change):
// MaxBatchPerReplica and Classify. They apply to the events added from
// now on; what open windows already hold stays as it was computed (a
// window that straddles the change mixes both, as it would had the
// engine itself been reconfigured mid-window). The window geometry and
// MaxClustersPerEngine are fixed at NewFeatures: cfg must repeat them,
// else Reconfigure returns an error and changes nothing.
func (f *Features) Reconfigure(cfg FeaturesConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Window != f.wcfg || cfg.MaxClustersPerEngine != f.maxClusters {
		return fmt.Errorf("%w: only MaxBatchPerReplica and Classify may change", errReconfigure)
	}
	f.maxBatch = maps.Clone(cfg.MaxBatchPerReplica)
	f.classify = cfg.Classify
	return nil
}

var errReconfigure = errors.Join(ErrConfig, errors.New("reconfigure"))
