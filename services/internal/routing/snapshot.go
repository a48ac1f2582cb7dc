package routing

import (
	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/solver/sched"
)

// RowPlan is what one demand row publishes: its weights (summing to 1 −
// Shed), its selection table (nil when everything is shed) and the demand
// the solve used, which weighs it in its cluster's top-level mix.
type RowPlan struct {
	Weights map[string]float64
	Shed    float64
	Table   *sched.Table
	Demand  float64
}

// ClusterSnapshot folds the plans of cluster c's rows (plans by row index)
// into its snapshot's routing fields. In a fleet of one class the row's
// weights, shed fraction and table are the snapshot's, exactly as before
// classes. Otherwise each row is a schemas.SnapshotClass with its own, and
// the top level is their mix weighted by demand (equal weights when the
// cluster has none), without a table: readers that know no classes route
// by it, ones that do route each class by its own.
func ClusterSnapshot(rows *Rows, c int, plans []RowPlan) *schemas.Snapshot {
	mine := rows.ClusterRows(c)
	if rows.Single {
		pl := plans[mine[0]]
		return &schemas.Snapshot{Weights: pl.Weights, ShedFraction: pl.Shed, Table: EncodeTable(pl.Table)}
	}
	s := &schemas.Snapshot{Weights: map[string]float64{}}
	total := 0.0
	for _, r := range mine {
		total += max(plans[r].Demand, 0)
	}
	for _, r := range mine {
		pl, k := plans[r], rows.Classes[rows.Rows[r].Class]
		s.Classes = append(s.Classes, schemas.SnapshotClass{Model: k.Model, MinPromptTokens: k.MinPromptTokens,
			MaxPromptTokens: k.MaxPromptTokens, Weights: pl.Weights, ShedFraction: pl.Shed, Table: EncodeTable(pl.Table)})
		share := 1 / float64(len(mine))
		if total > 0 {
			share = max(pl.Demand, 0) / total
		}
		for e, w := range pl.Weights {
			s.Weights[e] += share * w
		}
		s.ShedFraction += share * pl.Shed
	}
	s.Weights, s.ShedFraction = Normalize(s.Weights, min(max(s.ShedFraction, 0), 1))
	return s
}

// EncodeTable is a table in a snapshot's form (nil for nil).
func EncodeTable(t *sched.Table) *schemas.SnapshotTable {
	if t == nil {
		return nil
	}
	slots, engines, enc, data := t.Encode()
	return &schemas.SnapshotTable{Slots: slots, Encoding: enc, Engines: engines, Data: data}
}

// RowRouting is a row's part of a snapshot: its weights, shed fraction and
// table as sent (nil when the snapshot carries none for it).
type RowRouting struct {
	Weights map[string]float64
	Shed    float64
	Table   *schemas.SnapshotTable
}

// SnapshotRows reads cluster c's snapshot back into its rows, the inverse
// of ClusterSnapshot, by row index: a fleet of one class takes the top
// level; otherwise each row takes its class (matched by model and band),
// or, for a class the snapshot does not list (an older optimizer, a fleet
// edited since), the top-level weights on the engines serving the class,
// rescaled, without a table.
func SnapshotRows(f *schemas.Fleet, rows *Rows, c int, s *schemas.Snapshot) map[int]RowRouting {
	out := map[int]RowRouting{}
	for _, r := range rows.ClusterRows(c) {
		k := rows.Classes[rows.Rows[r].Class]
		switch sc, ok := s.Class(k.Model, k.MaxPromptTokens); {
		case rows.Single:
			out[r] = RowRouting{Weights: s.Weights, Shed: s.ShedFraction, Table: s.Table}
		case ok:
			out[r] = RowRouting{Weights: sc.Weights, Shed: sc.ShedFraction, Table: sc.Table}
		default:
			w := map[string]float64{}
			for e, fe := range f.Engines {
				if v := s.Weights[fe.Name]; v > 0 && rows.Serves(rows.Rows[r].Class, e) {
					w[fe.Name] = v
				}
			}
			if len(w) == 0 {
				continue
			}
			w, shed := Normalize(w, s.ShedFraction)
			out[r] = RowRouting{Weights: w, Shed: shed}
		}
	}
	return out
}
