package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// writeVision writes a random Gemma 3 at its tiny shape and a tiny vision
// projector for it (f32, as the browser loads them with quant "f32") into
// dir, and returns their names there.
func writeVision(t *testing.T, dir string) (base, mmproj string) {
	t.Helper()
	model, mm, err := synth.WriteVisionFiles(dir, "tiny-gemma3", "tiny-gemma3", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(model), filepath.Base(mm)
}

// gradientPNG is a w × h PNG of a colour gradient.
func gradientPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(x * y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testBrowserVision: an engine loaded in the page with a projector (by
// URL, and from an ArrayBuffer) answers an image in a chat message (an
// image_url part with a data URL) with the native CPU engine's greedy
// tokens; a projector that is not one, and an image for an engine without
// a projector, are clear errors.
func testBrowserVision(t *testing.T, eval func(*testing.T, string) apiResult, modelDir string) {
	base, mmproj := writeVision(t, modelDir)
	pic := gradientPNG(t, 40, 30)
	img, err := vision.Decode(pic, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := runNativeWith(t, filepath.Join(modelDir, base),
		runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "What is this?"}}, Images: []*vision.Image{img}, MaxTokens: 12},
		runtime.Options{Quant: "f32", MMProj: filepath.Join(modelDir, mmproj)})
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic)
	r := eval(t, fmt.Sprintf(`(async () => {
		try {
			const messages = [{role: "user", content: [{type: "image_url", image_url: {url: %[3]q}}, {type: "text", text: "What is this?"}]}];
			const byURL = await tessera.createEngine({model: "/models/%[1]s", projector: "/models/%[2]s", quant: "f32", context: 256});
			const a = await byURL.chat.completions.create({messages, temperature: 0, max_tokens: 12});
			const info = byURL.model;
			await byURL.unload();
			const buf = await (await fetch("/models/%[2]s")).arrayBuffer();
			const byBuffer = await tessera.createEngine({model: "/models/%[1]s", projector: buf, quant: "f32", context: 256});
			const b = await byBuffer.chat.completions.create({messages, temperature: 0, max_tokens: 12});
			await byBuffer.unload();
			const codes = [];
			try { await tessera.createEngine({model: "/models/%[1]s", projector: new ArrayBuffer(4096), quant: "f32"}); codes.push("none"); } catch (e) { codes.push(e.message); }
			const plain = await tessera.createEngine({model: "/models/%[1]s", quant: "f32", context: 256});
			try { await plain.chat.completions.create({messages, max_tokens: 4}); codes.push("none"); } catch (e) { codes.push(e.message); }
			await plain.unload();
			return {IDs: a.tessera.token_ids, Lists: [b.tessera.token_ids], PromptIDs: a.tessera.prompt_ids,
				Content: a.choices[0].message.content, ChatTemplate: info.vision === true && info.projector.imageTokens > 0, Codes: codes};
		} catch (e) { return {Err: e.code + ": " + e.message}; }
	})()`, base, mmproj, dataURL))
	if !r.ChatTemplate {
		t.Error("model.vision is not true, or model.projector has no imageTokens")
	}
	// The image's positions hold ids made of its hash (runtime's
	// imageTokens), so equal prompts mean the image reached the engine.
	prompt := make([]int, len(want.Prompt))
	for i, id := range want.Prompt {
		prompt[i] = int(id)
	}
	if !slices.Equal(r.PromptIDs, prompt) {
		t.Errorf("prompt ids:\n browser %v\n  native %v", r.PromptIDs, prompt)
	}
	if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
		t.Errorf("greedy reply to an image:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
	}
	if len(r.Lists) != 1 || !slices.Equal(r.Lists[0], want.IDs) {
		t.Errorf("projector from an ArrayBuffer: %v; native %v", r.Lists, want.IDs)
	}
	if len(r.Codes) != 2 || !strings.Contains(r.Codes[0], "mmproj") || !strings.Contains(r.Codes[1], "projector") {
		t.Errorf("errors: %q; want a bad projector named as an mmproj, and an image without a projector refused", r.Codes)
	}
}

// browserProjectors are the projector types the page runs besides
// Gemma 3's (testBrowserVision): each synth projector shape with the
// language model it feeds.
var browserProjectors = []struct{ base, projector string }{
	{"tiny-smolvlm", "tiny-idefics3"},
	{"tiny-qwen2vl", "tiny-qwen2vl"},
	{"tiny-qwen3vl-deep", "tiny-qwen3vl"},
}

// testBrowserProjectors: for each of browserProjectors, an engine loaded
// in the page answers an image in a chat message with the native CPU
// engine's prompt and greedy tokens (the image's size is not the tower's,
// so each resizes or tiles it as its type does).
func testBrowserProjectors(t *testing.T, eval func(*testing.T, string) apiResult, modelDir string) {
	pic := gradientPNG(t, 52, 37)
	img, err := vision.Decode(pic, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic)
	for _, c := range browserProjectors {
		t.Run(c.projector, func(t *testing.T) {
			model, mm, err := synth.WriteVisionFiles(modelDir, c.base, c.projector, dtype.F32, 1)
			if err != nil {
				t.Fatal(err)
			}
			base, mmproj := filepath.Base(model), filepath.Base(mm)
			want := runNativeWith(t, model,
				runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "Describe it."}}, Images: []*vision.Image{img}, MaxTokens: 12},
				runtime.Options{Quant: "f32", MMProj: mm})
			r := eval(t, fmt.Sprintf(`(async () => {
				try {
					const messages = [{role: "user", content: [{type: "image_url", image_url: {url: %[3]q}}, {type: "text", text: "Describe it."}]}];
					const e = await tessera.createEngine({model: "/models/%[1]s", projector: "/models/%[2]s", quant: "f32", context: 256});
					const a = await e.chat.completions.create({messages, temperature: 0, max_tokens: 12});
					await e.unload();
					return {IDs: a.tessera.token_ids, PromptIDs: a.tessera.prompt_ids, Content: a.choices[0].message.content};
				} catch (e) { return {Err: e.code + ": " + e.message}; }
			})()`, base, mmproj, dataURL))
			prompt := make([]int, len(want.Prompt))
			for i, id := range want.Prompt {
				prompt[i] = int(id)
			}
			if !slices.Equal(r.PromptIDs, prompt) {
				t.Errorf("prompt ids:\n browser %v\n  native %v", r.PromptIDs, prompt)
			}
			if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
				t.Errorf("greedy reply to an image:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
			}
		})
	}
}
