package synth

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
)

// TestGemma4ConfigJSON: every Gemma 4 shape's config.json, real sizes
// included (whose weights are too large to write in a test), reads back
// as the shape's config; and a config the keys cannot express is refused
// by name rather than written as another model.
func TestGemma4ConfigJSON(t *testing.T) {
	n := 0
	for _, s := range shapes {
		if s.Config.Gemma4 == nil {
			continue
		}
		n++
		b, err := hfConfigJSON(s, "Gemma4ForConditionalGeneration", dtype.BF16)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		got, err := models.ParseHFConfig(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.Name, err, b)
		}
		if !reflect.DeepEqual(got, s.Config) {
			t.Errorf("%s: config.json reads back as\n%+v\n%+v, want\n%+v\n%+v", s.Name, got, *got.Gemma4, s.Config, *s.Config.Gemma4)
		}
	}
	if n < 8 {
		t.Errorf("%d Gemma 4 shapes, want the 8 of gemma4.go", n)
	}

	base, err := Lookup("tiny-gemma4")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(c *models.Config, g *models.Gemma4)
		want   string
	}{
		{"last sliding", func(c *models.Config, _ *models.Gemma4) { c.Sliding[c.Layers-1] = true }, "last layer"},
		{"partial sliding", func(_ *models.Config, g *models.Gemma4) { g.LocalRopeDim = 8 }, "rotations of 8 of 16"},
		{"rope factors", func(c *models.Config, _ *models.Gemma4) { c.RopeFactors[0] = 2 }, "not a proportional rotation"},
		{"widths", func(_ *models.Config, g *models.Gemma4) { g.FFNs[1] = 50 }, "feed-forward widths"},
		{"one doubled", func(_ *models.Config, g *models.Gemma4) { g.FFNs[8] = g.FFNs[0] }, "every shared layer's or none"},
		{"values", func(c *models.Config, g *models.Gemma4) { g.VFromK = make([]bool, c.Layers); g.VFromK[0] = true }, "layer 0's values from keys"},
		{"scores", func(c *models.Config, _ *models.Gemma4) { c.QueryScale = 0.5 }, "unscaled scores"},
	} {
		s := base
		c := s.Config
		c.Sliding = append([]bool(nil), c.Sliding...)
		c.RopeFactors = append([]float32(nil), c.RopeFactors...)
		g := *c.Gemma4
		g.FFNs = append([]int(nil), g.FFNs...)
		c.Gemma4 = &g
		tc.change(&c, &g)
		s.Config = c
		if _, err := hfConfigJSON(s, "Gemma4ForConditionalGeneration", dtype.F32); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
