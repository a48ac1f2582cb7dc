package console

import "github.com/ilb-router/ilb/schemas"

// Engine colours come in one family per region, so that weight moving to
// another region is a change of hue on the charts and weight moving
// within a region only a change of shade. Families are from the Tableau
// 20 and ColorBrewer palettes, dark to light.
var families = [][]string{
	{"#1f5fa8", "#4e8fd6", "#8dbcec", "#174a82", "#b9d6f5"}, // blues
	{"#d9661f", "#f29a4a", "#f7c08a", "#a84d12", "#fbd9b5"}, // oranges
	{"#2e8b57", "#5fbf84", "#9bdcb0", "#1f6b41", "#c6ecd2"}, // greens
	{"#7b4fb3", "#a783d6", "#cbb5ea", "#5c3590", "#e0d4f4"}, // purples
	{"#c23b3b", "#e06e6e", "#f0a3a3", "#962a2a", "#f7cccc"}, // reds
	{"#8c6d31", "#bd9e5a", "#dcc697", "#6b5123", "#ece0c4"}, // browns
}

// engineColors gives each fleet engine a colour: its region's family (in
// order of first appearance) and its rank within the region.
func engineColors(f *schemas.Fleet) map[string]string {
	regionIdx := map[string]int{}
	rank := map[string]int{}
	out := make(map[string]string, len(f.Engines))
	for _, e := range f.Engines {
		ri, ok := regionIdx[e.Region]
		if !ok {
			ri = len(regionIdx)
			regionIdx[e.Region] = ri
		}
		fam := families[ri%len(families)]
		out[e.Name] = fam[rank[e.Region]%len(fam)]
		rank[e.Region]++
	}
	return out
}
