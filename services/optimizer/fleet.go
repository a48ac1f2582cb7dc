package optimizer

import (
	"context"
	"fmt"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/services/internal/routing"
	"github.com/ilb-router/ilb/solver/optimize"
)

// SetFleet hands a new fleet file to the solve loop, which applies it
// before its next solve and solves at once: an engine added gets weight
// as soon as the solver gives it some (from its fleet parameters until
// its features arrive), an engine removed is left out of the problem,
// so its weight is 0 in the next snapshot of every cluster. Engines and
// clusters the fleet still lists keep their features and profiles. The
// fleet must pass the checks New makes; SetFleet returns an error, and
// changes nothing, otherwise.
func (o *Optimizer) SetFleet(ctx context.Context, f *schemas.Fleet) error {
	if err := (Config{Fleet: f}).validateFleet(); err != nil {
		return fmt.Errorf("optimizer: fleet: %w", err)
	}
	select {
	case o.inbox <- input{fleet: f}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setFleet applies a new fleet on the solve loop.
func (o *Optimizer) setFleet(f *schemas.Fleet) {
	o.cfg.Fleet = f
	o.in.fleet = f
	for name := range o.in.engines {
		if _, ok := f.Engine(name); !ok {
			delete(o.in.engines, name)
			delete(o.in.profiles, name)
		}
	}
	for k := range o.in.pairs {
		if _, ok := f.Engine(k.engine); !ok {
			delete(o.in.pairs, k)
		}
	}
	o.shape.setFleet(f)
	o.setRows(f)
	o.solver = optimize.Solver{}
	o.ticks.setEngines(f)
	o.sched.markDirty(o.now())
	o.log.Info("optimizer: fleet applied", "clusters", len(f.Clusters), "engines", len(f.Engines))
}

// setEngines makes the event clock wait for the fleet's engines only: a
// new engine is not awaited until it first reports, a removed one never
// again.
func (t *ticks) setEngines(f *schemas.Fleet) {
	for name := range t.lastSeen {
		if _, ok := f.Engine(name); !ok {
			delete(t.lastSeen, name)
			delete(t.partOf, name)
		}
	}
	for _, e := range f.Engines {
		if _, ok := t.lastSeen[e.Name]; !ok {
			t.lastSeen[e.Name] = t.solved - expectTicks // as if silent for long
		}
	}
}

// setRows takes the new fleet's demand rows (routing.Rows). When they
// changed (models, context limits or clusters edited), the demand
// estimate starts again from the prior: its rows are not the new ones.
func (o *Optimizer) setRows(f *schemas.Fleet) {
	rows := routing.NewRows(f)
	same := rows.Len() == o.rows.Len()
	for r := 0; same && r < rows.Len(); r++ {
		same = rows.Rows[r].Name == o.rows.Rows[r].Name
	}
	o.rows = rows
	if !same {
		o.dem = newDemand(o.cfg.Demand)
	}
}
