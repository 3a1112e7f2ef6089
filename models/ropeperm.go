package models

// PairsFromHalves reorders the rows of a q or k projection (heads of
// headDim rows; or of its bias or norm, rows of one value) from Hugging
// Face's halves layout to GGUF's pairs, as llama.cpp's converter reorders
// a Llama's weights so that RopePairs rotates them: row h·d + 2j + s of
// the result is row h·d + s·d/2 + j of vals.
func PairsFromHalves(vals []float32, heads, headDim int) []float32 {
	return permuteRows(vals, heads, headDim, false)
}

// HalvesFromPairs is the inverse of PairsFromHalves.
func HalvesFromPairs(vals []float32, heads, headDim int) []float32 {
	return permuteRows(vals, heads, headDim, true)
}

func permuteRows(vals []float32, heads, headDim int, toHalves bool) []float32 {
	cols := len(vals) / (heads * headDim)
	out := make([]float32, len(vals))
	for h := range heads {
		for j := range headDim / 2 {
			for s := range 2 {
				pairs := (h*headDim + 2*j + s) * cols
				halves := (h*headDim + s*headDim/2 + j) * cols
				src, dst := halves, pairs
				if toHalves {
					src, dst = pairs, halves
				}
				copy(out[dst:dst+cols], vals[src:src+cols])
			}
		}
	}
	return out
}
