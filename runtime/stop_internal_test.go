package runtime

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestStopper: stop strings are found across token boundaries, the text
// before them comes out exactly once, and nothing of them leaks.
func TestStopper(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stops  []string
		pieces []string
		want   string // everything emitted, flush included when no stop hit
		stop   string
	}{
		{"none", []string{"xyz"}, []string{"a", "b", "c"}, "abc", ""},
		{"in one piece", []string{"END"}, []string{"ab", "cENDd", "e"}, "abc", "END"},
		{"across pieces", []string{"END"}, []string{"abE", "N", "Dxx"}, "ab", "END"},
		{"false start released", []string{"END"}, []string{"abE", "Nx", "y"}, "abENxy", ""},
		{"held at the end", []string{"END"}, []string{"abEN"}, "abEN", ""},
		{"earliest of two", []string{"cd", "b"}, []string{"abcd"}, "a", "b"},
		{"overlapping prefixes", []string{"aab"}, []string{"a", "a", "a", "b"}, "a", "aab"},
		{"multibyte", []string{"é!"}, []string{"caf", "é", "!", "x"}, "caf", "é!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStopper(tc.stops)
			var out strings.Builder
			stop := ""
			for _, p := range tc.pieces {
				o, s := st.feed(p)
				out.WriteString(o)
				if s != "" {
					stop = s
					break
				}
			}
			if stop == "" {
				out.WriteString(st.flush())
			}
			if out.String() != tc.want || stop != tc.stop {
				t.Errorf("got %q stop %q, want %q stop %q", out.String(), stop, tc.want, tc.stop)
			}
		})
	}
}

// TestLogprobs: log-softmax against a direct float64 computation, and the
// alternatives sorted most likely first with ties by id.
func TestLogprobs(t *testing.T) {
	logits := []float32{1, 3, -2, 3, 0.5, 7, -1}
	lp, top := Logprobs(logits, 1, 4)
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v))
	}
	if want := 3 - math.Log(sum); math.Abs(float64(lp)-want) > 1e-6 {
		t.Errorf("logprob %g, want %g", lp, want)
	}
	ids := []int32{}
	for _, a := range top {
		ids = append(ids, a.ID)
	}
	if want := []int32{5, 1, 3, 0}; !slices.Equal(ids, want) {
		t.Errorf("top %v, want %v", ids, want)
	}
	if _, none := Logprobs(logits, 0, 0); none != nil {
		t.Errorf("top 0 gave %v", none)
	}
	if _, all := Logprobs(logits, 0, 20); len(all) != len(logits) {
		t.Errorf("top 20 of 7 gave %d", len(all))
	}
}

// TestOpenAIPenalties: frequency and presence penalties subtract from the
// logits of generated tokens only, as OpenAI defines them.
func TestOpenAIPenalties(t *testing.T) {
	s := NewSampler(SamplerOptions{FrequencyPenalty: 0.5, PresencePenalty: 1})
	s.prompt = 2
	logits := []float32{4, 4, 4, 4}
	// Token 0 is in the prompt only; 1 was generated twice, 2 once.
	s.Dist(logits, []int32{0, 0, 1, 2, 1})
	want := []float32{4, 4 - 2*0.5 - 1, 4 - 0.5 - 1, 4}
	for i := range want {
		if logits[i] != want[i] {
			t.Errorf("logit %d = %g, want %g", i, logits[i], want[i])
		}
	}
	if (SamplerOptions{PresencePenalty: 3}).Validate() == nil {
		t.Error("presence penalty 3 accepted")
	}
	if (SamplerOptions{FrequencyPenalty: 0.1}).greedy() {
		t.Error("a penalised sampler counts as greedy")
	}
}

// TestStreamNextAll: a reader that falls behind takes every queued token
// at once, in order, and learns of the end after the last.
func TestStreamNextAll(t *testing.T) {
	st := newStream(func() {})
	for i := range 3 {
		st.push(Token{ID: int32(i)})
	}
	got, ok := st.NextAll(nil)
	if !ok || len(got) != 3 || got[0].ID != 0 || got[2].ID != 2 {
		t.Fatalf("NextAll = %v, %v", got, ok)
	}
	st.push(Token{ID: 3})
	st.finish(Stats{}, nil)
	if got, ok = st.NextAll(got[:0]); !ok || len(got) != 1 || got[0].ID != 3 {
		t.Fatalf("after finish: %v, %v", got, ok)
	}
	if _, ok = st.NextAll(nil); ok {
		t.Fatal("NextAll after the end reported a token")
	}
}
