package host_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/host"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// TestPluginImage: a plugin hands an image as bytes with its prompt and
// gets the tokens the engine gives the same prompt and image; images past
// the policy's bytes, or that are not images, are refused.
func TestPluginImage(t *testing.T) {
	base, mm, err := synth.WriteVisionFiles(t.TempDir(), "tiny-gemma3", "tiny-gemma3", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	pic := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			pic.Set(x, y, color.NRGBA{uint8(x * 8), uint8(y * 8), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, pic)
	img, err := vision.Decode(b.Bytes(), vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	prompt := runtime.ImageMarker + "describe"
	var want strings.Builder
	if _, err := eng.Generate(context.Background(), runtime.Request{Prompt: prompt, Images: []*vision.Image{img}, MaxTokens: 12},
		func(tk runtime.Token) error { want.WriteString(tk.Text); return nil }); err != nil {
		t.Fatal(err)
	}
	if want.Len() == 0 {
		t.Fatal("the engine generated nothing")
	}
	h := newHost(t, eng)
	for _, tc := range []struct {
		name   string
		pol    host.Policy
		images [][]byte
		says   string
	}{
		{"an image", host.Policy{}, [][]byte{b.Bytes()}, ""},
		{"over the bytes", host.Policy{MaxImageBytes: 100}, [][]byte{b.Bytes()}, "limit"},
		{"not an image", host.Policy{}, [][]byte{[]byte("hello")}, "invalid argument"},
		{"no marker for it", host.Policy{}, [][]byte{b.Bytes(), b.Bytes()}, "markers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := loadPlugin(t, h, "testplugin", tc.pol)
			res, err := p.Run(context.Background(), input(t, map[string]any{"mode": "generate",
				"request": map[string]any{"prompt": prompt, "images": tc.images, "max_tokens": 12}}))
			switch {
			case tc.says == "" && (err != nil || string(res.Output) != want.String() || res.PromptTokens <= eng.ImageTokens()):
				t.Errorf("%q (%d prompt tokens), %v; want %q", res.Output, res.PromptTokens, err, want.String())
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}
