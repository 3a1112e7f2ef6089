package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// testKind is one tokenizer of each kind the package has, for tests that
// must hold for all of them.
type testKind struct {
	name string
	tok  Tokenizer
}

// testKinds loads them, skipping the test when the shared files are
// missing (the WordPiece vocabulary is in the repository).
func testKinds(t testing.TB) []testKind {
	t.Helper()
	kinds := []testKind{{"wordpiece-uncased", loadWordPieceInternal(t, "uncased")}}
	for _, rt := range realTokenizers {
		kinds = append(kinds, testKind{rt.name, mustLoad(t, rt.load)})
	}
	for _, fam := range hfFamilies {
		kinds = append(kinds, testKind{fam.name, mustLoadHF(t, fam.load)})
	}
	gg, err := NewGGUFBPE(ggufVocabFromHF(t, "qwen3", "default"))
	if err != nil {
		t.Fatal(err)
	}
	return append(kinds, testKind{"gguf-default(qwen3)", gg})
}

// boundedTexts mix ordinary text, hostile shapes and special tokens
// written out.
func boundedTexts() []string {
	texts := append([]string{paragraph, "<|im_start|>user\nhi<|im_end|>\n<s>[CLS] x [SEP]<start_of_turn>"}, awkwardTexts...)
	for _, sh := range hostileShapes {
		texts = append(texts, sh.make(500))
	}
	return texts
}

// TestEncodeBoundedAgrees: within the bound the ids are Encode's (and
// EncodeSpecial's), at the bound too, and one id less is ErrTooLong, with
// the bound in the message.
func TestEncodeBoundedAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("every tokenizer kind, text, BOS and special flag (skipped by -short, as make check runs; make test runs it)")
	}
	ctx := context.Background()
	for _, k := range testKinds(t) {
		for _, text := range boundedTexts() {
			for _, bos := range []bool{false, true} {
				for _, special := range []bool{false, true} {
					encode, bounded := k.tok.Encode, EncodeBounded
					if special {
						encode = func(s string, b bool) []int { return EncodeSpecial(k.tok, s, b) }
						bounded = EncodeSpecialBounded
					}
					what := fmt.Sprintf("%s: special %v, bos %v, %.40q", k.name, special, bos, text)
					want := encode(text, bos)
					for _, max := range []int{0, -1, len(want), len(want) + 1, 1 << 30} {
						got, err := bounded(ctx, k.tok, text, bos, max)
						if err != nil || !slices.Equal(got, want) {
							t.Errorf("%s: bound %d: %v, %v; want %v", what, max, got, err, want)
						}
					}
					if len(want) < 2 {
						continue
					}
					for _, max := range []int{len(want) - 1, 1} {
						got, err := bounded(ctx, k.tok, text, bos, max)
						if !errors.Is(err, ErrTooLong) || got != nil || !strings.Contains(err.Error(), fmt.Sprint(max)) {
							t.Errorf("%s: bound %d for %d ids: %v, %v; want ErrTooLong naming the bound", what, max, len(want), got, err)
						}
					}
				}
			}
		}
	}
}

// TestEncodeBoundedStopsEarly: 8 MiB of each hostile shape with a bound of
// 4096 ids is refused, or encoded when it fits, after work in proportion
// to the bound, not the text. (Its time is BenchmarkEncodeBounded's
// business.) The work counted is merges, words and chunks; what is not
// counted (normalizing, scanning for added tokens) is linear and fast.
func TestEncodeBoundedStopsEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("8 MiB of hostile text per shape and tokenizer (skipped by -short, as make check runs; make test runs it)")
	}
	const bound = 4096
	kinds := testKinds(t)
	for _, sh := range hostileShapes {
		text := sh.make(8 << 20)
		for _, k := range kinds {
			be := k.tok.(boundedEncoder)
			for _, special := range []bool{false, true} {
				l := &limit{ctx: context.Background(), max: bound}
				ids := be.encodeBounded(l, text, true, special)
				switch {
				case l.err == nil && len(ids) <= bound:
					// It fits (WordPiece makes one [UNK] of a long word).
				case !errors.Is(l.err, ErrTooLong):
					t.Errorf("%s: %s: error %v, want ErrTooLong", k.name, sh.name, l.err)
				}
				if l.work > 16*bound {
					t.Errorf("%s: %s: %d steps of work for a bound of %d", k.name, sh.name, l.work, bound)
				}
			}
		}
	}
}

// cancelAfter is a context that is done after its Err has been asked n
// times: a cancellation that arrives in the middle of an encoding.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Done() <-chan struct{} { return make(chan struct{}) }

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestEncodeBoundedContext: a done context stops an encoding before it
// starts and in the middle of a long one, with an error that wraps the
// context's.
func TestEncodeBoundedContext(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	text := randomText(rand.New(rand.NewPCG(11, 0)), 1<<18) + strings.Repeat("hello ", 1<<16)
	for _, k := range testKinds(t) {
		if ids, err := EncodeBounded(done, k.tok, "hello", true, 0); !errors.Is(err, context.Canceled) || ids != nil {
			t.Errorf("%s: cancelled context: %v, %v", k.name, ids, err)
		}
		for _, special := range []bool{false, true} {
			ctx := &cancelAfter{Context: context.Background(), n: 2}
			ids, err := encodeBounded(ctx, k.tok, text, true, special, 0)
			if !errors.Is(err, context.Canceled) || ids != nil {
				t.Errorf("%s: cancelled midway (special %v): %d ids, %v", k.name, special, len(ids), err)
			}
		}
	}
}

// foreign is a Tokenizer from outside the package: EncodeBounded can only
// judge its ids afterwards.
type foreign struct{ Tokenizer }

func TestEncodeBoundedForeignTokenizer(t *testing.T) {
	tok := foreign{mustLoad(t, loadTok512Model)}
	want := tok.Encode(paragraph, true)
	if got, err := EncodeBounded(context.Background(), tok, paragraph, true, len(want)); err != nil || !slices.Equal(got, want) {
		t.Errorf("within the bound: %v, %v", got, err)
	}
	if _, err := EncodeSpecialBounded(context.Background(), tok, paragraph, true, len(want)-1); !errors.Is(err, ErrTooLong) {
		t.Errorf("over the bound: %v", err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := EncodeBounded(done, tok, paragraph, true, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// BenchmarkEncodeBounded refuses 8 MiB of each hostile shape with a bound
// of 4096 ids, as a server does with a request far longer than its
// context: well under a second for every kind.
func BenchmarkEncodeBounded(b *testing.B) {
	kinds := testKinds(b)
	for _, sh := range hostileShapes {
		text := sh.make(8 << 20)
		for _, k := range kinds {
			b.Run(k.name+"/"+sh.name, func(b *testing.B) {
				for b.Loop() {
					EncodeBounded(context.Background(), k.tok, text, true, 4096)
				}
			})
		}
	}
}
