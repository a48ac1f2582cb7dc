package optimize

import "testing"

func TestGallop(t *testing.T) {
	for n := range 20 {
		for ans := 0; ans <= n; ans++ {
			for g := -1; g <= n+1; g++ {
				probes := 0
				got := gallop(g, n, func(i int) bool {
					probes++
					if i < 0 || i >= n {
						t.Fatalf("n %d: probe %d out of range", n, i)
					}
					return i >= ans
				})
				if got != ans {
					t.Fatalf("n %d ans %d guess %d: got %d", n, ans, g, got)
				}
			}
		}
	}
}
