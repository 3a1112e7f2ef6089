package tokenizer

import (
	"context"
	"errors"
	"fmt"
)

// ErrTooLong is returned (wrapped) when a text has more tokens than a caller allows.
var ErrTooLong = errors.New("tokenizer: more tokens than allowed")

// EncodeBounded is tok.Encode(text, addBOS) that stops early: when ctx is
// done (the error wraps ctx.Err()) or as soon as the ids are known to
// exceed maxTokens (maxTokens <= 0: no bound; the error wraps ErrTooLong
// and says the bound), without tokenizing the rest of the text where the
// format allows it.
//
// A server encodes text it does not control: this is how a request of
// megabytes is refused in the time it takes to look at it, instead of
// pinning a core until it is tokenized. Within the bound the ids are
// exactly tok.Encode's.
func EncodeBounded(ctx context.Context, tok Tokenizer, text string, addBOS bool, maxTokens int) ([]int, error) {
	return encodeBounded(ctx, tok, text, addBOS, false, maxTokens)
}

// EncodeSpecialBounded is the same for EncodeSpecial (the text of a
// rendered chat template with special tokens).
func EncodeSpecialBounded(ctx context.Context, tok Tokenizer, text string, addBOS bool, maxTokens int) ([]int, error) {
	return encodeBounded(ctx, tok, text, addBOS, true, maxTokens)
}

// boundedEncoder is implemented by every tokenizer of this package. Their
// Encode and EncodeSpecial call it with no limit, so bounded and unbounded
// encoding are one code path. It returns the ids, or nil with l.err set
// once l says to stop; special matches special tokens written in the text.
type boundedEncoder interface {
	encodeBounded(l *limit, text string, addBOS, special bool) []int
}

var (
	_ boundedEncoder = (*SentencePiece)(nil)
	_ boundedEncoder = (*BPE)(nil)
	_ boundedEncoder = (*WordPiece)(nil)
)

func encodeBounded(ctx context.Context, tok Tokenizer, text string, addBOS, special bool, maxTokens int) ([]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, stopped(err)
	}
	l := &limit{max: max(maxTokens, 0)}
	if ctx.Done() != nil {
		l.ctx = ctx // a context that can never be done is not worth polling
	}
	if be, ok := tok.(boundedEncoder); ok {
		ids := be.encodeBounded(l, text, addBOS, special)
		if l.err != nil {
			return nil, l.err
		}
		return ids, nil
	}
	// A tokenizer from elsewhere: it can only be judged afterwards.
	var ids []int
	if special {
		ids = EncodeSpecial(tok, text, addBOS)
	} else {
		ids = tok.Encode(text, addBOS)
	}
	if err := ctx.Err(); err != nil {
		return nil, stopped(err)
	}
	if !l.fits(len(ids)) {
		return nil, l.err
	}
	return ids, nil
}

// limit is what a bounded encoding must respect: the caller's context and
// the most ids it may produce. The zero limit never stops anything, and
// costs a nil check per step, which is what Encode uses.
type limit struct {
	ctx   context.Context // nil: never done
	max   int             // most ids allowed; 0: no bound
	steps int             // since ctx was last polled
	work  int             // steps in all, for tests that bound the work done
	err   error           // why the encoding stopped
}

// pollEvery is how many steps (merges, words, chunks) pass between looks at
// the context: often enough to stop within a millisecond or so, rarely
// enough that the look costs nothing measurable.
const pollEvery = 1024

// step counts one unit of work; it is false once the encoding must stop.
func (l *limit) step() bool {
	if l.err != nil {
		return false
	}
	l.work++
	if l.ctx == nil {
		return true
	}
	if l.steps++; l.steps < pollEvery {
		return true
	}
	l.steps = 0
	if err := l.ctx.Err(); err != nil {
		l.err = stopped(err)
		return false
	}
	return true
}

// fits reports whether n ids are within the bound, and records ErrTooLong
// when they are not. Callers pass a lower bound of the final count (the
// ids so far, plus what must still come), so a false is final.
func (l *limit) fits(n int) bool {
	if l.err != nil {
		return false
	}
	if l.max > 0 && n > l.max {
		l.err = fmt.Errorf("%w (the limit is %d)", ErrTooLong, l.max)
		return false
	}
	return true
}

// bounded reports whether there is a bound worth computing lower bounds
// for.
func (l *limit) bounded() bool { return l.max > 0 }

func stopped(err error) error { return fmt.Errorf("tokenizer: encoding stopped: %w", err) }

// idsCap is the capacity to start an id slice with for a text of n bytes
// that may produce at most max ids: enough for typical text, but a huge
// text with a small bound does not allocate for ids it will never have.
func idsCap(n int, l *limit) int {
	c := n/3 + 4
	if l.max > 0 {
		c = min(c, l.max+1)
	}
	return min(c, 1<<16)
}
