package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// imagePageState is what the page shows of a conversation with an image.
type imagePageState struct {
	Waiting, Shown int    // images above the message box; in the user's message
	Sent           int    // images the saved user message carries
	Reply, Info    string // the reply's text as generated; the model line
}

const readImagePage = `(() => {
	const ms = tesseraDemo.messages;
	return {Waiting: document.querySelectorAll("#attachments img").length,
		Shown: document.querySelectorAll("#chat-log .msg.user .images img").length,
		Sent: ms.length ? (ms[0].images || []).length : 0,
		Reply: ms.length > 1 ? ms[1].content : "", Info: document.getElementById("model-info").textContent};
})()`

// testImagePage loads a model with its vision projector through the model
// panel's URL fields, attaches an image with the Image button as a person
// would, sends it with a question, and sees the image in the conversation
// and the native engine's greedy reply. dir holds writeVision's files,
// served under prefix.
func testImagePage(t *testing.T, ctx context.Context, base, prefix, dir string) {
	baseName, mmproj := writeVision(t, dir)
	png := filepath.Join(dir, "picture.png")
	pic := gradientPNG(t, 48, 32)
	if err := os.WriteFile(png, pic, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := vision.Decode(pic, vision.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := runNativeWith(t, filepath.Join(dir, baseName),
		runtime.Request{Messages: []chat.Message{{Role: "user", Content: runtime.ImageMarker + "What is it?"}}, Images: []*vision.Image{img}, MaxTokens: 8},
		runtime.Options{Quant: "f32", MMProj: filepath.Join(dir, mmproj)})

	page := base + "/?mode=chat&quant=f32&temperature=0&steps=8&system=&model=" + prefix + baseName + "&projector=" + prefix + mmproj
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx)
	// A conversation of its own: the page opens the last one saved, and
	// the tests before this one saved theirs.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("new-chat"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("load"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById("attach").hidden`, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("no Image button after loading a model with a projector: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("image-file"), []string{png})); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll("#attachments img").length === 1`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the picked image is not shown above the message box: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("chat-input").value = "What is it?"; document.getElementById("send").click(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, 2*time.Minute)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[imagePageState](readImagePage))
	if err != nil {
		t.Fatal(err)
	}
	if s.Waiting != 0 || s.Shown != 1 || s.Sent != 1 {
		t.Errorf("after Send: %d images waiting, %d in the conversation, %d in the saved message; want 0, 1, 1", s.Waiting, s.Shown, s.Sent)
	}
	if s.Reply != want.Text {
		t.Errorf("reply %q; native %q", s.Reply, want.Text)
	}
	t.Logf("model line: %s", s.Info)
	if os.Getenv("TESSERA_SCREENSHOT") != "" {
		screenshot(t, ctx)
	}
}
