//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cogentcore.org/core/colors"
	"cogentcore.org/core/core"
	"cogentcore.org/core/events"
	"cogentcore.org/core/icons"
	"cogentcore.org/core/keymap"
	"cogentcore.org/core/math32"
	"cogentcore.org/core/paint"
	"cogentcore.org/core/styles"
	"cogentcore.org/core/styles/states"
	"cogentcore.org/core/styles/units"
	"cogentcore.org/core/text/rich"
	"cogentcore.org/core/text/text"
	"cogentcore.org/core/tree"

	"github.com/tessera-llm/tessera/runtime"
)

// uiTick is how often a streaming reply or a load's progress is redrawn:
// often enough to look live, rarely enough that a fast model is not slowed
// by layout.
const uiTick = 50 * time.Millisecond

// app is the chat window and its state. Fields below body are read and
// written only with the window's lock held: in event handlers, or between
// body.AsyncLock and body.AsyncUnlock in other goroutines.
type app struct {
	cfg   config
	start time.Time
	body  *core.Body

	modelButton *core.FileButton
	deviceChip  *core.Frame
	deviceText  *core.Text
	banner      *core.Frame
	bannerText  *core.Text
	loadRow     *core.Frame
	loadMeter   *core.Meter
	loadText    *core.Text
	conv        *core.Frame
	input       *core.TextField
	sendButton  *core.Button
	stopButton  *core.Button
	statusText  *core.Text

	model    *model
	loading  string // the path being loaded, or ""
	loadProg *loadProgress
	history  []*message
	reply    *reply // the reply streaming now, or nil
	note     string // the banner's text: device note or error
	noteErr  bool   // the banner shows an error, not a note
	status   string

	autosent bool      // --autosend has sent its message
	shownAt  time.Time // when the window was first shown

	exitCode   atomic.Int32 // what run returns
	firstReply sync.Once    // the screenshot and exit after the first reply
}

// reply is a reply being streamed into msg.
type reply struct {
	stream  *runtime.Stream
	msg     *message
	stopped bool // the stop button (or a new chat, or model) ended it
}

func newApp(c config, start time.Time) *app {
	return &app{cfg: c, start: start}
}

// run shows the window, loads --model and returns the exit code once the
// window is closed.
func (a *app) run() int {
	a.build()
	a.body.OnShow(func(e events.Event) {
		if a.shownAt.IsZero() {
			a.shownAt = time.Now()
			fmt.Printf("window shown after %s\n", time.Since(a.start).Round(time.Millisecond))
		}
	})
	if a.cfg.model != "" {
		a.load(a.cfg.model)
	}
	a.body.RunMainWindow()
	if a.model != nil {
		a.model.Close()
	}
	return int(a.exitCode.Load())
}

// build makes the widgets.
func (a *app) build() {
	b := core.NewBody("Tessera chat")
	a.body = b
	b.Styler(func(s *styles.Style) { s.Gap.Set(units.Dp(8)) })

	header := core.NewFrame(b)
	header.Styler(func(s *styles.Style) {
		s.Align.Items = styles.Center
		s.Grow.Set(1, 0)
		s.Gap.X.Dp(12)
	})
	core.NewIcon(header).SetIcon(icons.Forum).Styler(func(s *styles.Style) {
		s.IconSize.Set(units.Dp(28))
		s.Color = colors.Scheme.Primary.Base
	})
	core.NewText(header).SetType(core.TextTitleLarge).SetText("Tessera").Styler(func(s *styles.Style) {
		s.SetTextWrap(false)
	})
	a.modelButton = core.NewFileButton(header).SetExtensions(".gguf,.bin").SetFilename(a.cfg.model)
	a.modelButton.SetTooltip("The model file (GGUF, or a llama2.c checkpoint with its tokenizer beside it)")
	a.modelButton.Updater(func() { a.modelButton.SetEnabled(a.loading == "") })
	a.modelButton.FinalUpdater(func() { // after FileButton's own: the name, not the path
		if a.modelButton.Filename != "" {
			a.modelButton.SetText(filepath.Base(a.modelButton.Filename))
		}
	})
	a.modelButton.OnChange(func(e events.Event) {
		if a.modelButton.Filename != "" {
			a.load(a.modelButton.Filename)
		}
	})
	core.NewStretch(header)
	a.deviceChip = core.NewFrame(header)
	a.deviceChip.Styler(func(s *styles.Style) {
		s.Align.Items = styles.Center
		s.Gap.X.Dp(6)
		s.Padding.Set(units.Dp(6), units.Dp(12))
		s.Border.Radius = styles.BorderRadiusFull
		s.Background = colors.Scheme.SurfaceContainerHigh
		s.Color = colors.Scheme.OnSurfaceVariant
	})
	showIf(a.deviceChip, func() bool { return a.model != nil })
	a.deviceChip.Updater(func() {
		if a.model != nil {
			a.deviceChip.SetTooltip("Runs on " + a.model.DeviceName())
		}
	})
	core.NewIcon(a.deviceChip).SetIcon(icons.Memory)
	a.deviceText = core.NewText(a.deviceChip).SetType(core.TextLabelLarge)
	a.deviceText.Styler(func(s *styles.Style) { s.SetTextWrap(false) })
	a.deviceText.Updater(func() {
		if a.model != nil {
			a.deviceText.SetText(html.EscapeString(deviceLabel(a.model.DeviceName())))
		}
	})
	newChat := core.NewButton(header).SetType(core.ButtonTonal).SetIcon(icons.AddComment).SetText("New chat")
	newChat.SetTooltip("Stop any reply and clear the conversation")
	newChat.OnClick(func(e events.Event) {
		a.stop()
		a.reply = nil // let it finish unseen
		a.history = nil
		a.status = ""
		a.refresh()
	})

	// The banner: why the model runs on the CPU, or why loading failed.
	a.banner = core.NewFrame(b)
	showIf(a.banner, func() bool { return a.note != "" })
	a.banner.Styler(func(s *styles.Style) {
		s.Grow.Set(1, 0)
		s.Align.Items = styles.Center
		s.Gap.X.Dp(8)
		s.Padding.Set(units.Dp(8), units.Dp(12))
		s.Border.Radius = styles.BorderRadiusMedium
		if a.noteErr {
			s.Background = colors.Scheme.Error.Container
			s.Color = colors.Scheme.Error.OnContainer
		} else {
			s.Background = colors.Scheme.Warn.Container
			s.Color = colors.Scheme.Warn.OnContainer
		}
	})
	core.NewIcon(a.banner).SetIcon(icons.Warning)
	a.bannerText = core.NewText(a.banner).SetType(core.TextBodyMedium)
	a.bannerText.Styler(func(s *styles.Style) { s.Grow.Set(1, 0) })
	a.bannerText.Updater(func() { a.bannerText.SetText(html.EscapeString(a.note)) })

	// Load progress.
	a.loadRow = core.NewFrame(b)
	showIf(a.loadRow, func() bool { return a.loading != "" })
	a.loadRow.Styler(func(s *styles.Style) {
		s.Direction = styles.Column
		s.Grow.Set(1, 0)
		s.Gap.Y.Dp(4)
	})
	a.loadText = core.NewText(a.loadRow).SetType(core.TextBodyMedium)
	a.loadText.Updater(func() {
		f := -1.0
		if a.loadProg != nil {
			f = a.loadProg.Fraction()
		}
		msg := "Loading " + filepath.Base(a.loading) + "…"
		if f >= 0 {
			msg += fmt.Sprintf(" %.0f%%", 100*f)
		}
		a.loadText.SetText(html.EscapeString(msg))
	})
	a.loadMeter = core.NewMeter(a.loadRow).SetMin(0).SetMax(1)
	a.loadMeter.Styler(func(s *styles.Style) { s.Grow.Set(1, 0) })
	a.loadMeter.Updater(func() {
		if a.loadProg != nil {
			a.loadMeter.SetValue(float32(max(a.loadProg.Fraction(), 0)))
		}
	})

	// The conversation.
	a.conv = core.NewFrame(b)
	a.conv.Styler(func(s *styles.Style) {
		s.Direction = styles.Column
		s.Grow.Set(1, 1)
		s.Min.Set(units.Dp(560), units.Dp(240)) // and so the window's first size
		s.Overflow.Y = styles.OverflowAuto
		s.Gap.Y.Dp(12)
		s.Padding.Set(units.Dp(12))
		s.Border.Radius = styles.BorderRadiusLarge
		s.Background = colors.Scheme.SurfaceContainerLow
		if len(a.history) == 0 { // the hint, in the middle
			s.Justify.Content = styles.Center
			s.Align.Items = styles.Center
		}
	})
	a.conv.Maker(func(p *tree.Plan) {
		if len(a.history) == 0 {
			tree.Add(p, func(w *core.Text) {
				w.SetType(core.TextBodyLarge)
				w.Styler(func(s *styles.Style) {
					s.Color = colors.Scheme.OnSurfaceVariant
					s.Text.Align = text.Center
				})
				w.Updater(func() { w.SetText(html.EscapeString(a.emptyHint())) })
			})
			return
		}
		for i := range a.history {
			tree.AddAt(p, strconv.Itoa(i), func(w *core.Frame) { a.makeBubble(w, i) })
		}
	})

	// The message box and the send and stop buttons.
	row := core.NewFrame(b)
	row.Styler(func(s *styles.Style) {
		s.Grow.Set(1, 0)
		s.Align.Items = styles.Center
		s.Gap.X.Dp(8)
	})
	a.input = core.NewTextField(row).SetPlaceholder("Write the start of a story…")
	a.input.SetText(a.cfg.prompt)
	a.input.StartFocus()
	a.input.Styler(func(s *styles.Style) {
		s.Grow.Set(1, 0)
		s.Max.X.Zero()
	})
	a.input.OnFirst(events.KeyChord, func(e events.Event) {
		if kf := keymap.Of(e.KeyChord()); kf == keymap.Enter || kf == keymap.Accept {
			e.SetHandled()
			a.send()
		}
	})
	a.sendButton = core.NewButton(row).SetIcon(icons.Send).SetText("Send")
	showIf(a.sendButton, func() bool { return a.reply == nil })
	// The state is set before styling (an Updater, not a Styler), so the
	// button's colours follow it in the same pass.
	a.sendButton.Updater(func() { a.sendButton.SetEnabled(a.model != nil) })
	a.sendButton.OnClick(func(e events.Event) { a.send() })
	a.stopButton = core.NewButton(row).SetIcon(icons.Stop).SetText("Stop")
	showIf(a.stopButton, func() bool { return a.reply != nil })
	a.stopButton.Styler(func(s *styles.Style) {
		s.Background = colors.Scheme.Error.Base
		s.Color = colors.Scheme.Error.On
	})
	a.stopButton.OnClick(func(e events.Event) { a.stop() })

	a.statusText = core.NewText(b).SetType(core.TextBodySmall)
	a.statusText.Styler(func(s *styles.Style) { s.Color = colors.Scheme.OnSurfaceVariant })
	a.statusText.Updater(func() {
		st := a.status
		if st == "" {
			st = " "
		}
		a.statusText.SetText(html.EscapeString(st))
	})
}

// showIf shows w only while visible says so. It sets the Invisible state
// in an updater: a Styler's DisplayNone would leave the widget invisible
// after the condition turns true again.
func showIf(w core.Widget, visible func() bool) {
	w.AsWidget().Updater(func() { w.AsWidget().SetState(!visible(), states.Invisible) })
}

// emptyHint is shown in an empty conversation.
func (a *app) emptyHint() string {
	switch {
	case a.loading != "":
		return "Loading the model…"
	case a.model == nil:
		return "Choose a model file to start."
	default:
		return "Write the start of a story and " + filepath.Base(a.model.Path) + " will continue it."
	}
}

// makeBubble configures w as the chat bubble of message i.
func (a *app) makeBubble(w *core.Frame, i int) {
	w.Styler(func(s *styles.Style) {
		s.Direction = styles.Column
		s.Padding.Set(units.Dp(10), units.Dp(14))
		s.Border.Radius = styles.BorderRadiusLarge
		s.Max.X.Pw(80)
		s.Gap.Y.Dp(2)
		if i >= len(a.history) {
			return
		}
		// Wrapped text is as wide as the bubble lets it be only when the
		// bubble grows; short messages keep a snug bubble.
		if a.history[i].Role == assistant || len(a.history[i].Text) > 60 {
			s.Grow.Set(1, 0)
		}
		if a.history[i].Role == user {
			s.Align.Self = styles.End
			s.Background = colors.Scheme.Primary.Container
			s.Color = colors.Scheme.Primary.OnContainer
		} else {
			s.Align.Self = styles.Start
			s.Background = colors.Scheme.SurfaceContainerHighest
			s.Color = colors.Scheme.OnSurface
		}
	})
	who := core.NewText(w).SetType(core.TextLabelMedium)
	who.Styler(func(s *styles.Style) {
		s.Font.Weight = rich.Bold
		s.Color = colors.Scheme.OnSurfaceVariant
	})
	who.Updater(func() {
		if i < len(a.history) && a.history[i].Role == user {
			who.SetText("You")
		} else if a.model != nil {
			who.SetText(html.EscapeString(strings.TrimSuffix(filepath.Base(a.model.Path), filepath.Ext(a.model.Path))))
		} else {
			who.SetText("Model")
		}
	})
	body := core.NewText(w).SetType(core.TextBodyLarge)
	body.Styler(func(s *styles.Style) {
		s.Text.WhiteSpace = text.WhiteSpacePreWrap
	})
	body.Updater(func() {
		if i >= len(a.history) {
			return
		}
		m := a.history[i]
		if m.Role == user {
			body.SetText(html.EscapeString(m.Text))
			return
		}
		t := replyMarkup(*m)
		if a.reply != nil && a.reply.msg == m {
			t += "…"
		}
		body.SetText(t)
	})
}

// refresh redraws everything after the state changed, keeping the newest
// message in view. The lock must be held.
func (a *app) refresh() {
	a.body.Update()
	a.conv.Defer(func() { a.conv.ScrollDimToContentEnd(math32.Y) })
}

// locked runs f with the window's lock held, from another goroutine.
func (a *app) locked(f func()) {
	a.body.AsyncLock()
	defer a.body.AsyncUnlock()
	f()
}

// load starts loading the model at path in the background, replacing the
// current one. The lock must be held (or the window not yet running).
func (a *app) load(path string) {
	if a.loading != "" {
		return
	}
	a.stop()
	a.reply = nil
	a.closeModel()
	a.loading = path
	a.note, a.noteErr = "", false
	a.status = ""
	p := &loadProgress{}
	a.loadProg = p
	if a.modelButton != nil {
		a.modelButton.SetFilename(path)
	}
	if a.body.Scene.RenderWindow() != nil {
		a.refresh()
	}
	opts := runtime.Options{Device: a.cfg.device}
	begin := time.Now()
	done := make(chan struct{})
	go func() { // progress
		t := time.NewTicker(uiTick)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				a.locked(func() {
					a.loadText.Update()
					a.loadMeter.Update()
				})
			}
		}
	}()
	go func() {
		m, err := loadModel(path, opts, p)
		close(done)
		took := time.Since(begin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "desktop: %v\n", err)
		} else {
			fmt.Printf("loaded %s on %s in %s (%s after start)\n", path, m.DeviceName(), took.Round(time.Millisecond), time.Since(a.start).Round(time.Millisecond))
			if n := m.DeviceNote(); n != "" {
				fmt.Printf("note: %s\n", n)
			}
		}
		a.locked(func() {
			a.loading = ""
			a.loadProg = nil
			if err != nil {
				a.note, a.noteErr = err.Error(), true
				a.status = "Loading failed. Choose another model file."
				a.refresh()
				if a.cfg.exitAfterReply {
					a.exitCode.Store(1)
					go a.quit()
				}
				return
			}
			a.model = m
			a.note, a.noteErr = m.DeviceNote(), false
			a.status = fmt.Sprintf("Loaded %s in %s.", filepath.Base(path), formatDuration(took))
			a.refresh()
			if a.cfg.autosend && !a.autosent {
				a.autosent = true
				a.send()
			}
		})
	}()
}

// closeModel stops using the current model and frees it.
func (a *app) closeModel() {
	if a.model == nil {
		return
	}
	m := a.model
	a.model = nil
	go m.Close() // it waits for the scheduler to stop; the window need not
}

// sampler is the sampling for one reply.
func (a *app) sampler() runtime.SamplerOptions {
	seed := uint64(a.cfg.seed)
	if a.cfg.seed < 0 {
		seed = rand.Uint64()
	}
	return runtime.SamplerOptions{
		Temperature: float32(a.cfg.temperature),
		TopP:        float32(a.cfg.topP),
		Seed:        seed,
	}
}

// send sends the message box's text and streams the reply. The lock must
// be held.
func (a *app) send() {
	if a.model == nil || a.reply != nil {
		return
	}
	msg := strings.TrimSpace(a.input.Text())
	if msg == "" {
		return
	}
	a.history = append(a.history, &message{Role: user, Text: msg})
	prompt, _ := promptFor(a.turns())
	fmt.Printf("prompt: %q\n", prompt)
	s, err := a.model.Start(context.Background(), runtime.Request{
		Prompt:    prompt,
		MaxTokens: a.cfg.maxTokens,
		Sampler:   a.sampler(),
	})
	if err != nil {
		a.note, a.noteErr = err.Error(), true
		a.refresh()
		return
	}
	r := &reply{stream: s, msg: &message{Role: assistant, Prompt: prompt}}
	a.history = append(a.history, r.msg)
	a.input.SetText("")
	a.reply = r
	a.status = "Thinking…"
	a.refresh()
	go a.receive(r)
}

// turns is the conversation as promptFor takes it.
func (a *app) turns() []message {
	t := make([]message, len(a.history))
	for i, m := range a.history {
		t[i] = *m
	}
	return t
}

// stop cancels the reply being streamed, if any. The lock must be held.
func (a *app) stop() {
	if a.reply != nil {
		a.reply.stopped = true
		a.reply.stream.Cancel()
	}
}

// receive streams r's tokens into its message, redrawing every uiTick.
func (a *app) receive(r *reply) {
	s := r.stream
	var out strings.Builder
	var first, last time.Time
	n := 0
	var err error
	for tok, terr := range s.Tokens() {
		if terr != nil {
			err = terr
			break
		}
		n++
		if n == 1 {
			first = time.Now()
		}
		out.WriteString(tok.Text)
		if time.Since(last) >= uiTick {
			last = time.Now()
			text, status := out.String(), fmt.Sprintf("%d tokens · %s tok/s", n, formatRate(liveRate(n, time.Since(first))))
			a.locked(func() {
				r.msg.Text = text
				if a.reply == r {
					a.status = status
					a.refresh()
				}
			})
		}
	}
	<-s.Done()
	text := out.String()
	var status string
	a.locked(func() {
		r.msg.Text = text
		if r.stopped { // canceled, or cut short by closing its model
			err = nil
		}
		status = statusLine(s.Stats(), r.stopped)
		if a.reply != r {
			return
		}
		a.reply = nil
		a.status = status
		if err != nil {
			a.note, a.noteErr = err.Error(), true
			a.exitCode.Store(1)
		}
		a.refresh()
	})
	fmt.Printf("reply: %q\n", text)
	fmt.Printf("stats: %s\n", status)
	if err != nil {
		fmt.Fprintf(os.Stderr, "desktop: %v\n", err)
	}
	if a.cfg.screenshot != "" || a.cfg.exitAfterReply {
		a.firstReply.Do(a.afterFirstReply)
	}
}

// afterFirstReply saves --screenshot and honours --exit-after-reply.
func (a *app) afterFirstReply() {
	if shot := a.cfg.screenshot; shot != "" {
		time.Sleep(4 * uiTick) // let the last update and the scroll be drawn
		if err := a.saveScreenshot(shot); err != nil {
			fmt.Fprintf(os.Stderr, "desktop: screenshot: %v\n", err)
			a.exitCode.Store(1)
		}
	}
	if a.cfg.exitAfterReply {
		a.quit()
	}
}

// saveScreenshot renders the window's contents to a PNG file.
func (a *app) saveScreenshot(path string) error {
	var img image.Image
	a.locked(func() {
		sc := a.body.Scene
		sc.RenderWidget()
		img = paint.RenderToImage(&sc.Painter)
		sc.NeedsRender()
	})
	if img == nil || img.Bounds().Empty() {
		return errors.New("the window rendered no image")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("screenshot: %s (%dx%d)\n", path, img.Bounds().Dx(), img.Bounds().Dy())
	return nil
}

// quit ends the app for --exit-after-reply: it closes the model and
// exits with the exit code, leaving the window to the process's end. Not
// through core.TheApp.Quit: Cogent Core v0.3.12's window Close frees the
// window's drawer under a render that got past its Lock's closed check
// (base.Window.Lock checks, then locks), and that render then panics
// (seen once in TestDesktopChat, the reply and screenshot done).
func (a *app) quit() {
	var m *model
	a.locked(func() { m, a.model = a.model, nil })
	if m != nil {
		m.Close()
	}
	os.Exit(int(a.exitCode.Load()))
}
