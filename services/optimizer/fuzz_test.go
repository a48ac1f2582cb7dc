package optimizer

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/arrowipc"
)

// FuzzDecodeRecord feeds arbitrary record values to the features and
// profiles decoders: they must return rows or an error that names a
// counted reason, never panic, and rows they return must round-trip.
func FuzzDecodeRecord(f *testing.F) {
	fleet := schemas.ExampleFleetOneModel()
	rec := schemas.FeaturesToRecord(memory.DefaultAllocator, trafficRows(fleet, 1, exampleDemand, nil))
	valid, err := arrowipc.EncodeStream(schemas.FeatureSchema, rec)
	rec.Release()
	if err != nil {
		f.Fatal(err)
	}
	prec := schemas.ProfilesToRecord(memory.DefaultAllocator, []schemas.Profile{{Engine: "e", SKU: "h100",
		FittedAtUnixNano: 1, CapacityRPS: 3, Samples: 1}})
	profiles, err := arrowipc.EncodeStream(schemas.ProfileSchema, prec)
	prec.Release()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(profiles)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("not arrow"))
	f.Add([]byte{})
	o, err := New(testConfig(fleet, "fuzz"), Deps{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &kgo.Record{Value: data}
		rows, _, err := o.decodeFeatures(r)
		if err == nil {
			o.in.addFeatures(rows) // must not panic on whatever decoded
		} else if _, ok := err.(errSkip); !ok {
			t.Fatalf("features: error %v is not a counted skip", err)
		}
		_, ps, err := o.decodeProfiles(r)
		if err == nil {
			o.in.addProfiles(ps)
		} else if _, ok := err.(errSkip); !ok {
			t.Fatalf("profiles: error %v is not a counted skip", err)
		}
	})
}
