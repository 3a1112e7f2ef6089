package backend

// Sampling is implemented by a backend that draws sampled tokens with
// kernels (the GPU): a sampled step then reads back a few bytes a row
// instead of the logits, and sampled steps chain like greedy ones. The
// engine's Sampler stays the reference: it hands the backend the values
// its own random stream would draw and each row's penalties as it would
// apply them; the backend settles every row's draw.
type Sampling interface {
	// SetSampling says how rows 0..len(rows)-1 of the following Sample
	// or KeepSampled calls draw; it must precede them, and holds until
	// the next call.
	SetSampling(rows []SampleRow) error
	// Sample applies each row's penalties to the first n rows of x, in
	// place, and draws a token for each.
	Sample(x Tensor, n int) ([]Drawn, error)
	// KeepSampled is Keep drawing as Sample does instead of taking the
	// argmax: one step of a chain, each row drawing its next unused value.
	KeepSampled(x Tensor, n int)
	// KeptDraws is, after Kept of a chain whose steps were kept with
	// KeepSampled, each row's draws used.
	KeptDraws() []Drawn
}

// MaxSampleColumns bounds the rows a Sampling backend draws from: the GPU
// sums weights of at most 1 as 64-bit fixed-point integers with 45
// fraction bits (sample.wgsl), which 2^19 columns could overflow. Real
// vocabularies stay below 2^18.
const MaxSampleColumns = 1<<19 - 1

// SampleRow is how one row draws: runtime.SamplerOptions less what the
// host resolves (the seed, the history).
type SampleRow struct {
	Temperature, TopP, MinP float32 // 0 temperature: the argmax
	// TopK is 0 (the whole row) or at most MaxTopK; a larger k below the
	// row's width cannot be drawn on the device.
	TopK int
	// Penalties change single logits before the draw; at most one entry
	// a token.
	Penalties []Penalty
	// Draws are the next values of the row's random stream in [0, 1): one
	// is used by each step that keeps more than one candidate. A chain of
	// n steps needs n (at most MaxChain).
	Draws []float64
}

// Penalty is what a sampler does to one token's logit l: l += Bias; then
// with Repeat != 0, l /= Repeat if l > 0, else l *= Repeat; then l -= Sub.
type Penalty struct {
	ID                int32
	Bias, Repeat, Sub float32
}

// Drawn is one row's draw.
type Drawn struct {
	Token int32
	// Draws is how many of the row's Draws the device used.
	Draws int
}
