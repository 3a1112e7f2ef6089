//go:build cgo

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

func TestPromptFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history []message
		want    string
		ok      bool
	}{
		{"empty", nil, "", false},
		{"only replies", []message{{Role: assistant, Text: "hello"}}, "", false},
		{"one message", []message{{Role: user, Text: "Once upon a time"}}, "Once upon a time", true},
		{"trimmed", []message{{Role: user, Text: "  Once upon a time \n"}}, "Once upon a time", true},
		{"the last user message", []message{
			{Role: user, Text: "Once upon a time"},
			{Role: assistant, Text: ", there was a dog.", Prompt: "Once upon a time"},
			{Role: user, Text: "The cat sat"},
		}, "The cat sat", true},
		{"a reply after it", []message{
			{Role: user, Text: "The cat sat"},
			{Role: assistant, Text: ""},
		}, "The cat sat", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := promptFor(tc.history)
			if got != tc.want || ok != tc.ok {
				t.Errorf("promptFor = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestReplyMarkup(t *testing.T) {
	for _, tc := range []struct {
		m    message
		want string
	}{
		{message{Role: assistant, Prompt: "Once upon a time", Text: ", there was a dog."},
			"<b>Once upon a time</b>, there was a dog."},
		{message{Role: assistant, Prompt: "Tom & <Tim>", Text: " ran \"home\""},
			"<b>Tom &amp; &lt;Tim&gt;</b> ran &#34;home&#34;"},
		{message{Role: assistant, Text: " Lily was happy."}, "Lily was happy."},
	} {
		if got := replyMarkup(tc.m); got != tc.want {
			t.Errorf("replyMarkup(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

func TestDeviceLabel(t *testing.T) {
	for name, want := range map[string]string{
		"cpu": "CPU",
		"webgpu:llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)": "WebGPU · llvmpipe · Vulkan",
		"webgpu:NVIDIA H200 (Vulkan)":                      "WebGPU · NVIDIA H200 · Vulkan",
		"webgpu:Apple M2":                                  "WebGPU · Apple M2",
	} {
		if got := deviceLabel(name); got != want {
			t.Errorf("deviceLabel(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestRates(t *testing.T) {
	if r := liveRate(1, time.Second); r != 0 {
		t.Errorf("liveRate of one token = %v, want 0", r)
	}
	if r := liveRate(11, 2*time.Second); r != 5 {
		t.Errorf("liveRate(11, 2s) = %v, want 5", r)
	}
	st := runtime.Stats{PromptTokens: 5, Generated: 101, Decode: time.Second, TimeToFirst: 3 * time.Millisecond}
	got := statusLine(st, true)
	for _, want := range []string{"101 tokens", "100 tok/s", "first token in 3.0 ms", "prompt 5 tokens", "stopped"} {
		if !strings.Contains(got, want) {
			t.Errorf("statusLine = %q, missing %q", got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		2500 * time.Microsecond: "2.5 ms",
		420 * time.Millisecond:  "420 ms",
		12 * time.Second:        "12.0 s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
