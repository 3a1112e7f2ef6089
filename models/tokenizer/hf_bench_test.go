package tokenizer

import (
	"strings"
	"testing"
)

// benchText is ~12 KB of mixed prose, code, numbers and non-Latin text, so
// that the pre-tokenizer, the merges and the word cache all take part.
var benchText = strings.Repeat("Once upon a time, there was a little girl named Lily. She liked to play outside in the sunshine.\n"+
	"def add(a, b):\n    return a + b  # 3.14159 and 12345\n"+
	"Как масштабировать модель: обучение, данные. 日本語のテキストと中文文本 🦙🚀\n", 40)

func BenchmarkHFEncode(b *testing.B) {
	for _, fam := range hfFamilies {
		b.Run(fam.name, func(b *testing.B) {
			tok := mustLoadHF(b, fam.load)
			b.SetBytes(int64(len(benchText)))
			for b.Loop() {
				tok.Encode(benchText, true)
			}
		})
		// Without the word cache every word is merged from scratch.
		b.Run(fam.name+"/uncached", func(b *testing.B) {
			tok := mustLoadHF(b, fam.load)
			b.SetBytes(int64(len(benchText)))
			for b.Loop() {
				tok.cache.mu.Lock()
				tok.cache.m = nil
				tok.cache.mu.Unlock()
				tok.Encode(benchText, true)
			}
		})
	}
}

func BenchmarkHFDecode(b *testing.B) {
	for _, fam := range hfFamilies {
		b.Run(fam.name, func(b *testing.B) {
			tok := mustLoadHF(b, fam.load)
			ids := tok.Encode(benchText, true)
			b.SetBytes(int64(len(benchText)))
			for b.Loop() {
				tok.Decode(ids)
			}
		})
	}
}
