package server_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// visionEngine loads a synthetic Gemma 3 with a tiny projector on the CPU.
func visionEngine(t *testing.T) *runtime.Engine {
	t.Helper()
	base, mm, err := synth.WriteVisionFiles(t.TempDir(), "tiny-gemma3", "tiny-gemma3", dtype.F32, 1)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.Load(base, runtime.Options{Device: "cpu", MMProj: mm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// picture is a PNG or JPEG of a w × h gradient.
func picture(t *testing.T, w, h int, format string) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(x * y), 255})
		}
	}
	var b bytes.Buffer
	var err error
	if format == "jpeg" {
		err = jpeg.Encode(&b, img, nil)
	} else {
		err = png.Encode(&b, img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(mime string, data []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// bombPNG declares w × h RGB pixels and holds rows rows of zeros, deflated.
func bombPNG(w, h, rows int) []byte {
	chunk := func(b *bytes.Buffer, typ string, data []byte) {
		binary.Write(b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	var ihdr bytes.Buffer
	binary.Write(&ihdr, binary.BigEndian, [2]uint32{uint32(w), uint32(h)})
	ihdr.Write([]byte{8, 2, 0, 0, 0})
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	row := make([]byte, 1+3*w)
	for range rows {
		zw.Write(row)
	}
	zw.Close()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk(&b, "IHDR", ihdr.Bytes())
	chunk(&b, "IDAT", z.Bytes())
	chunk(&b, "IEND", nil)
	return b.Bytes()
}

// TestChatImageOpenAIClient sends an image through the official OpenAI Go
// client, as an image_url content part with a data URL, and gets the
// tokens the engine generates for the same messages with the image where
// the part was (what the CLI does: run --mmproj --image).
func TestChatImageOpenAIClient(t *testing.T) {
	eng := visionEngine(t)
	_, url := serve(t, eng, server.Options{})
	c := client(url)
	pic := picture(t, 32, 32, "png")
	want, _ := generate(t, eng, runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "describe"}},
		Images: []*vision.Image{decode(t, pic)}, MaxTokens: 20, IgnoreEOS: true})
	if want == "" {
		t.Fatal("the engine generated nothing")
	}
	for _, stream := range []bool{false, true} {
		params := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(20), Temperature: openai.Float(0),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL("image/png", pic)}),
				openai.TextContentPart("describe"),
			})}}
		var got string
		if stream {
			s := c.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			got = acc.Choices[0].Message.Content
		} else {
			res, err := c.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			got = res.Choices[0].Message.Content
			if res.Usage.PromptTokens <= int64(eng.ImageTokens()) {
				t.Errorf("%d prompt tokens for an image of %d", res.Usage.PromptTokens, eng.ImageTokens())
			}
		}
		if got != want {
			t.Errorf("stream %v: %q, the engine's %q", stream, got, want)
		}
	}
}

func decode(t *testing.T, data []byte) *vision.Image {
	t.Helper()
	img, err := vision.Decode(data, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestChatHostileImages: images that are not, or that would take more
// memory than their bytes let on, get 400 with the reason, and the
// server answers the next request as before; so does a text-only model
// given an image.
func TestChatHostileImages(t *testing.T) {
	eng := visionEngine(t)
	_, url := serve(t, eng, server.Options{})
	jp := picture(t, 64, 48, "jpeg")
	chatWith := func(url string, content ...map[string]any) map[string]any {
		return map[string]any{"model": modelName, "max_tokens": 5, "temperature": 0,
			"messages": []any{map[string]any{"role": "user", "content": content}}}
	}
	image := func(u string) map[string]any {
		return map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}}
	}
	text := map[string]any{"type": "text", "text": "describe"}
	good := chatWith(url, image(dataURL("image/png", picture(t, 32, 32, "png"))), text)
	status, want, _ := post(t, url+"/v1/chat/completions", good)
	if status != http.StatusOK {
		t.Fatalf("good image: %d %v", status, want)
	}
	for _, tc := range []struct {
		name, url, says string
	}{
		{"60000x60000 PNG header", dataURL("image/png", bombPNG(60000, 60000, 1)), "past the limits"},
		{"PNG zip bomb", dataURL("image/png", bombPNG(8000, 8000, 4000)), "past the limits"},
		{"truncated JPEG", dataURL("image/jpeg", jp[:len(jp)/2]), "bad image"},
		{"not base64", "data:image/png;base64,@@@@", "base64"},
		{"remote URL", "https://example.com/cat.png", "data URLs"},
		{"not an image", dataURL("image/png", []byte("hello")), "bad image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := post(t, url+"/v1/chat/completions", chatWith(url, image(tc.url), text))
			if msg := errorMessage(t, body); status != http.StatusBadRequest || !strings.Contains(msg, tc.says) {
				t.Errorf("%d %q, want 400 saying %q", status, msg, tc.says)
			}
		})
	}
	status, again, _ := post(t, url+"/v1/chat/completions", good)
	if status != http.StatusOK || again["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] !=
		want["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] {
		t.Errorf("after the hostile images: %d %v, want %v", status, again, want)
	}

	// A text-only model refuses an image rather than reading its marker as
	// text.
	_, textURL := serve(t, cpuEngine(t), server.Options{})
	status, body, _ := post(t, textURL+"/v1/chat/completions", chatWith(textURL, image(dataURL("image/png", picture(t, 8, 8, "png"))), text))
	if msg := errorMessage(t, body); status != http.StatusBadRequest || !strings.Contains(msg, "vision projector") {
		t.Errorf("text-only model: %d %q", status, msg)
	}
}

// TestImageDialects: an image reaches the model the same way through the
// Responses API (an input_image part) and the Messages API (an image
// block with a base64 source) as through Chat Completions.
func TestImageDialects(t *testing.T) {
	eng := visionEngine(t)
	_, url := serve(t, eng, server.Options{})
	pic := picture(t, 32, 32, "png")
	want, _ := generate(t, eng, runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "describe"}},
		Images: []*vision.Image{decode(t, pic)}, MaxTokens: 12, IgnoreEOS: true})
	status, res, _ := post(t, url+"/v1/responses", map[string]any{"model": modelName, "max_output_tokens": 12, "temperature": 0,
		"input": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_image", "image_url": dataURL("image/png", pic)},
			map[string]any{"type": "input_text", "text": "describe"}}}}})
	if status != http.StatusOK {
		t.Fatalf("responses: %d %v", status, res)
	}
	if got := res["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; got != want {
		t.Errorf("responses: %q, want %q", got, want)
	}
	status, res, _ = post(t, url+"/v1/messages", map[string]any{"model": modelName, "max_tokens": 12, "temperature": 0,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(pic)}},
			map[string]any{"type": "text", "text": "describe"}}}}})
	if status != http.StatusOK {
		t.Fatalf("messages: %d %v", status, res)
	}
	// Anthropic's blocks are joined by a newline: the marker, then the text.
	wantM, _ := generate(t, eng, runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "\ndescribe"}},
		Images: []*vision.Image{decode(t, pic)}, MaxTokens: 12, IgnoreEOS: true})
	if got := res["content"].([]any)[0].(map[string]any)["text"]; got != wantM {
		t.Errorf("messages: %q, want %q", got, wantM)
	}
}

// TestRemoteImages: an image named by http(s) URL is fetched only when
// the server is told to (Options.RemoteImages), and then gives what the
// same bytes as a data URL give, in each dialect; a fetch past its bytes,
// time or redirects, from a host not allowed, or from an address that is
// not public gets 400, and the server goes on answering.
func TestRemoteImages(t *testing.T) {
	eng := visionEngine(t)
	pic := picture(t, 32, 32, "png")
	mux := http.NewServeMux()
	mux.HandleFunc("/cat.png", func(w http.ResponseWriter, r *http.Request) { w.Write(pic) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/cat.png", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length: the limit must hold while reading.
		for range 64 {
			w.Write(make([]byte, 4096))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	images := newHTTPServer(t, mux)
	lim := server.DefaultImageLimits
	lim.MaxBytes = 64 << 10
	want, _ := generate(t, eng, runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "describe"}},
		Images: []*vision.Image{decode(t, pic)}, MaxTokens: 8, IgnoreEOS: true})
	chatWith := func(u string) map[string]any {
		return map[string]any{"model": modelName, "max_tokens": 8, "temperature": 0, "ignore_eos": true,
			"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}},
				map[string]any{"type": "text", "text": "describe"}}}}}
	}
	content := func(res map[string]any) any {
		return res["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
	}
	refused := func(t *testing.T, url, image, says string) {
		t.Helper()
		status, body, _ := post(t, url+"/v1/chat/completions", chatWith(image))
		if msg := errorMessage(t, body); status != http.StatusBadRequest || !strings.Contains(msg, says) {
			t.Errorf("%s: %d %q, want 400 saying %q", image, status, msg, says)
		}
	}

	t.Run("off by default", func(t *testing.T) {
		_, url := serve(t, eng, server.Options{})
		refused(t, url, images+"/cat.png", "does not fetch")
	})
	t.Run("loopback refused unless allowed", func(t *testing.T) {
		_, url := serve(t, eng, server.Options{RemoteImages: &server.RemoteImages{}})
		refused(t, url, images+"/cat.png", "not a public address")
	})
	t.Run("fetched", func(t *testing.T) {
		_, url := serve(t, eng, server.Options{ImageLimits: lim,
			RemoteImages: &server.RemoteImages{AllowPrivate: true, Timeout: 2 * time.Second, MaxRedirects: 2}})
		for _, path := range []string{"/cat.png", "/moved"} {
			status, res, _ := post(t, url+"/v1/chat/completions", chatWith(images+path))
			if status != http.StatusOK || content(res) != want {
				t.Errorf("%s: %d %v, want %q", path, status, res, want)
			}
		}
		status, res, _ := post(t, url+"/v1/responses", map[string]any{"model": modelName, "max_output_tokens": 8, "temperature": 0,
			"input": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_image", "image_url": images + "/cat.png"},
				map[string]any{"type": "input_text", "text": "describe"}}}}})
		if status != http.StatusOK || res["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != want {
			t.Errorf("responses: %d %v, want %q", status, res, want)
		}
		status, res, _ = post(t, url+"/v1/messages", map[string]any{"model": modelName, "max_tokens": 4, "temperature": 0,
			"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": images + "/cat.png"}},
				map[string]any{"type": "text", "text": "describe"}}}}})
		if status != http.StatusOK {
			t.Errorf("messages with a url source: %d %v", status, res)
		}
		for _, tc := range []struct{ path, says string }{
			{"/missing", "404"},
			{"/big", "more than 65536 bytes"},
			{"/loop", "more than 2 redirects"},
			{"/slow", "Timeout"},
		} {
			refused(t, url, images+tc.path, tc.says)
		}
		refused(t, url, "ftp://example.com/cat.png", `not "ftp" URLs`)
		refused(t, url, "http://user:pw@example.com/cat.png", "credentials")
		status, res, _ = post(t, url+"/v1/chat/completions", chatWith(images+"/cat.png"))
		if status != http.StatusOK || content(res) != want {
			t.Errorf("after the refusals: %d %v, want %q", status, res, want)
		}
	})
	t.Run("hosts", func(t *testing.T) {
		_, url := serve(t, eng, server.Options{RemoteImages: &server.RemoteImages{AllowPrivate: true, Hosts: []string{"images.example"}}})
		refused(t, url, images+"/cat.png", "only from images.example")
	})
}
