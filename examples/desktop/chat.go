//go:build cgo

package main

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// role says who wrote a message.
type role int

const (
	user role = iota
	assistant
)

// message is one turn of the conversation.
type message struct {
	Role role
	Text string
	// Prompt is, for a reply, the text the model was given: the reply
	// continues it.
	Prompt string
}

// promptFor returns the prompt for the model's next reply to history.
//
// Tessera's models so far carry no chat template (stories260K is a plain
// text-continuation model), so the prompt is the last user message, which
// the reply continues: "Once upon a time" is answered with the rest of the
// story. Earlier turns stay on screen but are not sent; a tiny model's
// context is better spent on the one request. The message is trimmed, since
// a trailing space makes SentencePiece vocabularies start the reply with an
// unlikely token. ok is false when there is no user message to answer.
func promptFor(history []message) (prompt string, ok bool) {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == user {
			return strings.TrimSpace(history[i].Text), true
		}
	}
	return "", false
}

// replyMarkup is how a reply is shown in its bubble: the prompt it
// continues, in bold, then the continuation, which usually starts with the
// space or the punctuation that joins it to the prompt. Both are escaped,
// since the text widget reads HTML.
func replyMarkup(m message) string {
	if m.Prompt == "" {
		return html.EscapeString(strings.TrimLeft(m.Text, " "))
	}
	return "<b>" + html.EscapeString(m.Prompt) + "</b>" + html.EscapeString(m.Text)
}

// deviceLabel shortens Engine.DeviceName for the window's header: "cpu"
// becomes "CPU" and "webgpu:llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)"
// becomes "WebGPU · llvmpipe · Vulkan".
func deviceLabel(name string) string {
	adapter, ok := strings.CutPrefix(name, "webgpu:")
	if !ok {
		return strings.ToUpper(name)
	}
	backend := ""
	if i := strings.LastIndex(adapter, " ("); i >= 0 && strings.HasSuffix(adapter, ")") {
		adapter, backend = adapter[:i], adapter[i+2:len(adapter)-1]
	}
	if i := strings.Index(adapter, " ("); i > 0 {
		adapter = adapter[:i]
	}
	label := "WebGPU · " + strings.TrimSpace(adapter)
	if backend != "" {
		label += " · " + backend
	}
	return label
}

// liveRate is the decode speed while a reply streams: tokens after the
// first, over the time since the first arrived.
func liveRate(tokens int, sinceFirst time.Duration) float64 {
	if tokens < 2 || sinceFirst <= 0 {
		return 0
	}
	return float64(tokens-1) / sinceFirst.Seconds()
}

// statusLine sums a finished (or stopped) reply up for the status bar.
func statusLine(st runtime.Stats, stopped bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tokens", st.Generated)
	if r := st.DecodeRate(); r > 0 {
		fmt.Fprintf(&b, " · %s tok/s", formatRate(r))
	}
	if st.TimeToFirst > 0 {
		fmt.Fprintf(&b, " · first token in %s", formatDuration(st.TimeToFirst))
	}
	if st.PromptTokens > 0 {
		fmt.Fprintf(&b, " · prompt %d tokens", st.PromptTokens)
	}
	switch {
	case stopped:
		b.WriteString(" · stopped")
	case st.StoppedAtLength:
		b.WriteString(" · context full")
	}
	return b.String()
}

// formatRate prints tokens per second with about three significant digits.
func formatRate(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 10:
		return fmt.Sprintf("%.1f", r)
	default:
		return fmt.Sprintf("%.2f", r)
	}
}

// formatDuration prints d in milliseconds below ten seconds, else seconds.
func formatDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.1f ms", ms)
	case d < 10*time.Second:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
