package runtime

import (
	"context"
	"iter"
	"sync"
)

// Stream delivers the tokens of one generation as the engine produces them.
// The engine never waits for a slow reader: tokens queue in the stream.
type Stream struct {
	cancel context.CancelFunc

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []Token
	done   bool
	err    error
	stats  Stats
	closed chan struct{}
}

func newStream(cancel context.CancelFunc) *Stream {
	s := &Stream{cancel: cancel, closed: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// push queues a token for the reader.
func (s *Stream) push(t Token) {
	s.mu.Lock()
	s.queue = append(s.queue, t)
	s.mu.Unlock()
	s.cond.Broadcast()
}

// finish ends the stream with err (nil on success) and the final stats.
func (s *Stream) finish(st Stats, err error) {
	s.mu.Lock()
	if !s.done {
		s.done, s.err, s.stats = true, err, st
		close(s.closed)
	}
	s.mu.Unlock()
	s.cond.Broadcast()
}

// Next returns the next token, waiting for it; ok is false once the
// generation is over and every token has been read (then see Err).
func (s *Stream) Next() (t Token, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.done {
		s.cond.Wait()
	}
	if len(s.queue) == 0 {
		return Token{}, false
	}
	t, s.queue = s.queue[0], s.queue[1:]
	return t, true
}

// NextAll appends to buf every token queued, waiting for at least one,
// so that a slow reader (a network writer) takes the tokens made while it
// was busy in one go; ok is false once the generation is over and every
// token has been read.
func (s *Stream) NextAll(buf []Token) (_ []Token, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.done {
		s.cond.Wait()
	}
	if len(s.queue) == 0 {
		return buf, false
	}
	buf = append(buf, s.queue...)
	clear(s.queue)
	s.queue = s.queue[:0]
	return buf, true
}

// Tokens ranges over the tokens; a failure comes as the last pair's error.
func (s *Stream) Tokens() iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) {
		for {
			t, ok := s.Next()
			if !ok {
				break
			}
			if !yield(t, nil) {
				s.Cancel()
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(Token{}, err)
		}
	}
}

// Cancel stops the generation; Err then reports context.Canceled.
func (s *Stream) Cancel() { s.cancel() }

// Done is closed when the generation is over.
func (s *Stream) Done() <-chan struct{} { return s.closed }

// Err is the reason the generation ended early, or nil.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stats describe the generation; they are final once Done is closed.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
