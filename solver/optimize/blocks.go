package optimize

// solveBlocks solves H·sol = rhs block by block: rows no engine couples
// (the groups assembleEngines joined) form independent systems, so a
// fleet of separate parts (models with their own engines, say) costs the
// sum of their cubes, not the cube of their sum.
func (nw *newtonWork) solveBlocks(n int) bool {
	g := &nw.coupled
	nw.blockRows = nw.blockRows[:0]
	nw.blockStart = append(nw.blockStart[:0], 0)
	order := nw.order[:0]
	for i := range n {
		if g.find(i) == i {
			for j := range n {
				if g.find(j) == i {
					order = append(order, j)
				}
			}
			nw.blockStart = append(nw.blockStart, int32(len(order)))
		}
	}
	nw.order = order
	if len(nw.blockStart) == 2 { // one block: factorise in place
		return nw.solveDense(nw.h, nw.rhs, n, nw.sol)
	}
	for b := 0; b+1 < len(nw.blockStart); b++ {
		rows := order[nw.blockStart[b]:nw.blockStart[b+1]]
		s := len(rows)
		sub := resize(nw.sub, s*s)
		rhs := resize(nw.subRHS, s)
		sol := resize(nw.subSol, s)
		for i, r := range rows {
			rhs[i] = nw.rhs[r]
			for j, c := range rows[:i+1] {
				sub[i*s+j] = nw.h[r*n+c]
				if c > r {
					sub[i*s+j] = nw.h[c*n+r]
				}
			}
		}
		if !nw.solveDense(sub, rhs, s, sol) {
			return false
		}
		for i, r := range rows {
			nw.sol[r] = sol[i]
		}
		nw.sub, nw.subRHS, nw.subSol = sub, rhs, sol
	}
	return true
}

// solveDense factorises a (lower triangle used) with growing ridges
// until it is positive definite enough, and solves for rhs into sol.
func (nw *newtonWork) solveDense(a, rhs []float64, n int, sol []float64) bool {
	nw.fact = resize(nw.fact, n*n)
	for ridge := 0.0; ; {
		copy(nw.fact, a[:n*n])
		if cholSolve(nw.fact, rhs, n, ridge, sol) {
			return true
		}
		if ridge == 0 {
			ridge = 1e-12
		} else if ridge *= 100; ridge > 1 {
			return false
		}
	}
}
