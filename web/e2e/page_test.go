package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chatState is what the chat page shows.
type chatState struct {
	Mode, Estimate, Template, Status, Stopped string
	Replies                                   []string
	Messages, Conversations                   int
	Generated                                 int
	ActionsUnder                              bool // Stop/Regenerate sit right after the last reply
}

const readChat = `(() => {
	const log = document.getElementById("chat-log");
	const replies = [...log.querySelectorAll(".msg.assistant")];
	const last = replies[replies.length - 1];
	return {Mode: document.body.dataset.mode, Estimate: document.getElementById("estimate").textContent,
		Template: document.getElementById("chat-template").textContent, Status: document.getElementById("status").textContent,
		Stopped: document.body.dataset.stopped || "",
		Replies: replies.map((e) => e.querySelector(".content").textContent),
		Messages: tesseraDemo.messages.length, Conversations: document.querySelectorAll("#conversations li").length,
		Generated: tesseraDemo.stats ? tesseraDemo.stats.generated : 0,
		ActionsUnder: !!last && last.nextElementSibling === document.getElementById("reply-actions") && !document.getElementById("reply-actions").hidden};
})()`

// waitReady waits for the page to have its engine and conversations.
func waitReady(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.tesseraDemo && tesseraDemo.ready === true`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the page did not start: %v", err)
	}
}

// testChatPage drives the chat as a person would, on stories260K (greedy,
// so a regenerated reply is the same): Send, Regenerate, Stop in the
// middle of a long reply (what came is kept), a reload that brings the
// conversation back from IndexedDB, a second conversation, and deleting
// one from the list.
func testChatPage(t *testing.T, ctx context.Context, base string) {
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?model=/models/stories260K.gguf&quant=f32&temperature=0&steps=20&mode=chat&system=Short+stories.")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx)
	read := func() chatState {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[chatState](readChat))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	act := func(js string) chatState {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.body.dataset.state = "idle"; `+js+`; return true; })()`)); err != nil {
			t.Fatal(err)
		}
		waitDone(t, ctx, 2*time.Minute)
		return read()
	}
	send := func(text string) string {
		return `document.getElementById("chat-input").value = "` + text + `"; document.getElementById("send").click()`
	}

	a := act(send("A cat"))
	if a.Mode != "chat" || len(a.Replies) != 1 || a.Replies[0] == "" || a.Messages != 2 || !strings.Contains(a.Estimate, "fits this device") ||
		a.Template == "" || !a.ActionsUnder || a.Conversations != 1 {
		t.Fatalf("after Send: %+v", a)
	}
	b := act(`document.getElementById("regenerate").click()`)
	if len(b.Replies) != 1 || b.Replies[0] != a.Replies[0] || b.Messages != 2 || !b.ActionsUnder {
		t.Errorf("greedy Regenerate: %+v, first reply %q", b, a.Replies[0])
	}

	// Stop in the middle of a long reply, with the button beside it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("max-tokens").value = "1500"; `+send("A dog")+`; return true; })()`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`parseInt(document.getElementById("tokens").textContent, 10) >= 20 && !document.getElementById("stop-reply").hidden`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("no tokens streamed, or no Stop beside the reply: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("stop-reply"))); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, time.Minute)
	c := read()
	if c.Stopped != "abort" || c.Generated < 20 || c.Generated >= 1500 || len(c.Replies) != 2 || c.Replies[1] == "" || c.Messages != 4 {
		t.Fatalf("Stop mid-reply: %+v; want an aborted reply of 20 to 1499 tokens, kept", c)
	}

	// A reload brings the conversation back, as it was.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?model=/models/stories260K.gguf&quant=f32&temperature=0&steps=20")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx)
	d := read()
	if d.Mode != "chat" || d.Messages != 4 || len(d.Replies) != 2 || d.Replies[0] != a.Replies[0] || d.Replies[1] != c.Replies[1] || d.Conversations != 1 || !d.ActionsUnder {
		t.Fatalf("after a reload: %+v; want the 4 messages back (replies %q, %q)", d, a.Replies[0], c.Replies[1])
	}
	if sys, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("system-prompt").value`)); sys != "Short stories." {
		t.Errorf("the system prompt after a reload: %q", sys)
	}

	// A second conversation, then delete the first from the list.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("new-chat").click(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	e := act(send("A bird"))
	if e.Messages != 2 || len(e.Replies) != 1 || e.Conversations != 2 {
		t.Errorf("a new chat: %+v", e)
	}
	js := `(async () => {
		const items = [...document.querySelectorAll("#conversations li")];
		const other = items.find((li) => !li.classList.contains("current"));
		other.querySelector(".delete").click();
		await new Promise((r) => setTimeout(r, 300));
		return document.querySelectorAll("#conversations li").length;
	})()`
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise)); err != nil || n != 1 {
		t.Errorf("after deleting a conversation: %d left (%v), want 1", n, err)
	}
	t.Logf("chat reply: %q; stopped after %d tokens; estimate: %s", a.Replies[0], c.Generated, a.Estimate)
}

// shownConversation is a stored conversation for the screenshots:
// Markdown (a list, code, emphasis, a link), a reasoning model's thinking,
// and markup that must stay text.
func shownConversation() string {
	reply := "Here is a **simple** plan:\n\n1. Pick a *sunny* day\n2. Pack `bread`, fruit and water\n3. Find shade in the park\n\n" +
		"```python\nfor step in [\"day\", \"pack\", \"park\"]:\n    print(step)\n```\n\n" +
		"More ideas: [a guide](https://example.com/picnic). <img src=x onerror=alert(1)> stays text."
	c := map[string]any{"id": "c-shown", "title": "Plan a picnic", "system": "Be brief.", "updated": time.Now().UnixMilli(), "messages": []any{
		map[string]any{"role": "user", "content": "Plan a picnic in three steps, with a snippet that prints the list."},
		map[string]any{"role": "assistant", "reasoning": "Three steps, short. Then a tiny program.", "content": reply},
		map[string]any{"role": "user", "content": "Thanks!"},
		map[string]any{"role": "assistant", "content": "Enjoy the picnic."},
	}}
	b, _ := json.Marshal(c)
	return string(b)
}

// testPickerAndScreens checks that the catalogue refuses a model too big
// for this device, shows a stored conversation's Markdown safely, and
// saves screenshots of it at 1280 and 390 px.
func testPickerAndScreens(t *testing.T, ctx context.Context, base string) {
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?mode=chat")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx)
	type picker struct {
		Text, About, Notice, State string
		Disabled, Fits             bool
		Loads                      int
	}
	p, err := chromedp.Run(ctx, chromedp.Evaluate[picker](`(async () => {
		const sel = document.getElementById("catalogue");
		const opt = [...sel.options].find((o) => o.value.endsWith("huge.gguf"));
		const small = [...sel.options].find((o) => o.value.includes("stories260K"));
		const before = tesseraDemo.progress.length;
		sel.value = opt.value;
		sel.dispatchEvent(new Event("change"));
		await new Promise((r) => setTimeout(r, 200));
		return {Text: opt.textContent, Disabled: opt.disabled, Fits: small && small.dataset.fits === "true",
			About: document.getElementById("catalogue-about").textContent,
			Notice: document.getElementById("notice").hidden || !document.getElementById("load-anyway").hidden ? "" : document.getElementById("notice-text").textContent,
			State: document.body.dataset.state, Loads: tesseraDemo.progress.length - before};
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		dir := os.Getenv("TESSERA_SCREENSHOTS")
		if dir == "" {
			dir = t.TempDir()
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	shot("error-1280.png") // the error view, saying why
	if !p.Disabled || !strings.Contains(p.Text, "too big") || !p.Fits || !strings.Contains(p.About, "needs about 250 GB") || !strings.Contains(p.Notice, "too big") || p.Loads != 0 {
		t.Errorf("picking a model that does not fit: %+v; want it disabled, refused with a reason, nothing loaded", p)
	}

	// A stored conversation, shown as a person sees it.
	store := `(async () => {
		const db = await new Promise((ok, fail) => { const r = indexedDB.open("tessera-chat", 1); r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
		const tx = db.transaction("conversations", "readwrite");
		tx.objectStore("conversations").put(` + shownConversation() + `);
		await new Promise((ok) => (tx.oncomplete = ok));
		db.close();
		return true;
	})()`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](store, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/?mode=chat&conversation=c-shown")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx)
	type rendered struct {
		Items, Code, Strong, Links, Injected int
		Reasoning, CodeText                  string
	}
	r, err := chromedp.Run(ctx, chromedp.Evaluate[rendered](`(() => {
		const c = document.querySelector("#chat-log .msg.assistant .content");
		return {Items: c.querySelectorAll("ol > li").length, Code: c.querySelectorAll("pre.code").length, Strong: c.querySelectorAll("strong").length,
			Links: c.querySelectorAll('a[href="https://example.com/picnic"][rel~="noopener"]').length,
			Injected: document.querySelectorAll("#chat-log img, #chat-log script").length,
			Reasoning: document.querySelector("#chat-log .reasoning").textContent, CodeText: c.querySelector("pre.code code").textContent};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Items != 3 || r.Code != 1 || r.Strong != 1 || r.Links != 1 || r.Injected != 0 || !strings.Contains(r.Reasoning, "Three steps") || !strings.Contains(r.CodeText, "print(step)") {
		t.Errorf("the stored conversation's Markdown: %+v", r)
	}
	shot("chat-1280.png")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(1))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || overflow {
		t.Errorf("at 390 px the page is wider than the screen (%v)", err)
	}
	shot("chat-390.png")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1000)); err != nil {
		t.Fatal(err)
	}
}
