package optimize

// solveBlocks solves H·sol = rhs block by block: rows no engine couples
// (the groups assembleEngines joined) form independent systems, so a
// fleet of separate parts (models with their own engines, say) costs the
// sum of their cubes, not the cube of their sum.
func (nw *newtonWork) solveBlocks(n int) bool {
	// Blocks in the order of their roots (a root is its block's lowest
	// row), rows ascending within a block: a counting sort on the root.
	g := &nw.coupled
	at := resize(nw.blockAt, n+1) // per root: where its rows go
	clear(at)
	for j := range n {
		at[g.find(j)+1]++
	}
	for i := range n {
		at[i+1] += at[i]
	}
	nw.blockStart = append(nw.blockStart[:0], 0)
	for i := range n {
		if at[i+1] > at[i] {
			nw.blockStart = append(nw.blockStart, int32(at[i+1]))
		}
	}
	order := resize(nw.order, n)
	for j := range n {
		r := g.find(j)
		order[at[r]] = j
		at[r]++
	}
	nw.order, nw.blockAt = order, at
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
