package sched_test

import (
	"fmt"

	"github.com/ilb-router/ilb/solver/sched"
)

func Example() {
	// The first snapshot: weights only. The order engines are given in
	// does not matter; the table sorts them by name.
	table, err := sched.Build([]string{"eng-b", "eng-a"}, []float64{0.3, 0.7}, sched.DefaultSlots)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%v %.4f\n", table.Engines(), table.Weights())
	fmt.Println("conv-123456 ->", table.Engine(table.Pick("conv-123456")))

	// The next solve adds an engine. Update moves the fewest keys.
	next, err := table.Update([]string{"eng-a", "eng-b", "eng-c"}, []float64{0.5, 0.3, 0.2})
	if err != nil {
		fmt.Println(err)
		return
	}
	minimum := sched.TotalVariation(
		map[string]float64{"eng-a": 0.7, "eng-b": 0.3},
		map[string]float64{"eng-a": 0.5, "eng-b": 0.3, "eng-c": 0.2})
	fmt.Printf("moved %.4f of keys, minimum %.4f\n", sched.MovedShare(table, next), minimum)

	// The snapshot carries the table; a replica decodes the same table.
	slots, engines, encoding, data := next.Encode()
	fmt.Println(slots, engines, encoding, len(data), "bytes")
	replica, err := sched.Decode(slots, engines, encoding, data)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("replica equal:", replica.Equal(next))

	// Guardrails: skip an unavailable engine; shed consistently.
	h := sched.HashKey("conv-123456")
	down, _ := next.Index("eng-a")
	e, ok := next.PickSkip(h, func(i int) bool { return i == down })
	fmt.Println("with eng-a down ->", next.Engine(e), ok)
	fmt.Println("shed at 0% / 100%:", sched.ShedKey(h, 0), sched.ShedKey(h, 1))
	// Output:
	// [eng-a eng-b] [0.7000 0.3000]
	// conv-123456 -> eng-a
	// moved 0.2000 of keys, minimum 0.2000
	// 65536 [eng-a eng-b eng-c] rle-uvarint-v1 11 bytes
	// replica equal: true
	// with eng-a down -> eng-c true
	// shed at 0% / 100%: false true
}
