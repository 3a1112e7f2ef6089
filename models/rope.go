package models

import (
	"fmt"
	"math"
	"strings"
)

// RoPE scaling, as a file asks for it. Every kind that stretches the
// context is a set of per-pair frequency divisors (Config.RopeFactors) and,
// for YaRN and LongRoPE, a factor on the cosines and sines
// (Config.RopeScale), so the kernels know one form:
//
//   - linear: every frequency divided by the factor.
//   - llama3: Llama 3.1's smooth blend (Llama3RopeFactors).
//   - yarn: the pairs that turn fewer than beta_slow times over the
//     original context are interpolated (divided by the factor), those
//     that turn more than beta_fast times kept, a linear ramp between;
//     cosines and sines times 1 + 0.1·ln(factor) (YarnRopeFactors,
//     YarnScale, after llama.cpp's ggml_rope_yarn_corr_dims and
//     rope_yarn and transformers' _compute_yarn_parameters).
//   - longrope (Phi-3): the file's own short and long factors, the long
//     ones where the context exceeds the original (ForContext), and its
//     attention factor.
//
// Anything else is refused by name: a model run unscaled past its
// original context computes another model without a word.

// YarnRopeFactors computes YaRN's per-pair frequency divisors for a
// rotation of ropeDim dimensions at base theta, stretched by factor from
// an original context of orig: 1/((1−m)/factor + m), m the ramp from 1
// (pairs below beta_fast's correction dimension, kept) to 0 (past
// beta_slow's, interpolated). truncate rounds the correction dimensions
// out to whole pairs, as llama.cpp always does (transformers' default).
func YarnRopeFactors(ropeDim int, theta, factor float64, orig int, betaFast, betaSlow float64, truncate bool) []float32 {
	corr := func(beta float64) float64 {
		return float64(ropeDim) * math.Log(float64(orig)/(beta*2*math.Pi)) / (2 * math.Log(theta))
	}
	low, high := corr(betaFast), corr(betaSlow)
	if truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = max(low, 0), min(high, float64(ropeDim-1))
	out := make([]float32, ropeDim/2)
	for i := range out {
		y := (float64(i) - low) / max(0.001, high-low)
		m := 1 - min(1, max(0, y)) // the share of the unscaled frequency
		out[i] = float32(1 / ((1-m)/factor + m))
	}
	return out
}

// YarnScale is YaRN's factor on the cosines and sines for a context
// stretched by factor: 0.1·ln(factor) + 1, divided by the same with
// logMul in place of 0.1 where logMul is given (llama.cpp's
// yarn_log_multiplier, transformers' mscale_all_dim).
func YarnScale(factor, logMul float64) float32 {
	mscale := func(m float64) float64 {
		if factor <= 1 {
			return 1
		}
		return float64(0.1*m*math.Log(factor)) + 1
	}
	if logMul != 0 {
		return float32(mscale(1) / mscale(logMul))
	}
	return float32(mscale(1))
}

// ForContext is c for sequences of up to n positions: Context n, and with
// LongRoPE the long factors where n exceeds the original context, as
// llama.cpp chooses them by its context per sequence.
func (c Config) ForContext(n int) Config {
	c.Context = n
	if c.RopeLong != nil && n > c.RopeOrigContext {
		c.RopeFactors = c.RopeLong
	}
	return c
}

// ropeScalingGGUF reads {arch}.rope.scaling.* (llama.cpp's keys: type,
// factor, original_context_length, attn_factor, yarn_beta_fast,
// yarn_beta_slow, yarn_log_multiplier) and LongRoPE's rope_factors_long
// and rope_factors_short tensors into m's config.
func ropeScalingGGUF(m *Model, md *metaReader) error {
	c := &m.Config
	kind, _ := md.f.String(md.prefix + "rope.scaling.type")
	factor := md.float("rope.scaling.factor", 0)
	if factor == 0 {
		factor = md.float("rope.scale_linear", 0) // the older key
	}
	orig := md.int("rope.scaling.original_context_length", c.Context)
	if md.err != nil {
		return md.err
	}
	if factor < 0 || math.IsNaN(factor) {
		return fmt.Errorf("%srope.scaling.factor %g must be positive", md.prefix, factor)
	}
	switch strings.ToLower(kind) {
	case "", "none":
	case "linear":
		if factor > 0 && factor != 1 {
			c.RopeFactors = linearRopeFactors(c.RopeDim, factor)
		}
	case "yarn":
		if !(factor > 0) || orig <= 0 {
			return fmt.Errorf("%srope.scaling: yarn needs a factor and an original context, got %g and %d", md.prefix, factor, orig)
		}
		fast, slow := md.float("rope.scaling.yarn_beta_fast", 32), md.float("rope.scaling.yarn_beta_slow", 1)
		c.RopeFactors = YarnRopeFactors(c.RopeDim, c.RopeTheta, factor, orig, fast, slow, true)
		c.RopeScale = YarnScale(factor, md.float("rope.scaling.yarn_log_multiplier", 0))
	case "longrope":
		// The factors are the file's tensors, read below.
	default:
		return fmt.Errorf("%srope.scaling.type %q is not supported (supported: none, linear, yarn, longrope)", md.prefix, kind)
	}
	if a := md.float("rope.scaling.attn_factor", 1); a != 1 {
		if !(a > 0) {
			return fmt.Errorf("%srope.scaling.attn_factor %g must be positive", md.prefix, a)
		}
		c.RopeScale = float32(a) * c.Mscale()
	}
	pair := func(name string) ([]float32, error) {
		t, ok := m.Tensors[name]
		if !ok {
			return nil, nil
		}
		if t.Elements() != c.RopeDim/2 {
			return nil, fmt.Errorf("%s has %d values for %d rotation pairs", name, t.Elements(), c.RopeDim/2)
		}
		return t.Float32()
	}
	short, err := pair("rope_factors_short.weight")
	if err != nil {
		return err
	}
	long, err := pair("rope_factors_long.weight")
	if err != nil {
		return err
	}
	if short != nil || long != nil {
		if short == nil || long == nil {
			return fmt.Errorf("LongRoPE needs rope_factors_short and rope_factors_long, the file has one")
		}
		c.RopeFactors, c.RopeLong, c.RopeOrigContext = short, long, orig
	}
	return nil
}

// Mscale is the factor on the cosines and sines: RopeScale, or 1.
func (c Config) Mscale() float32 {
	if c.RopeScale == 0 {
		return 1
	}
	return c.RopeScale
}
