package server

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// event is what one choice's generation made since the handler last
// looked: the tokens queued meanwhile (one, when the writer keeps up), or
// the end.
type event struct {
	choice int
	toks   []runtime.Token
	end    bool
	stats  runtime.Stats
	err    error
}

// start queues every prompt's n samples on m (choice p*n+i is sample i of
// prompt p) and returns one channel with the events of them all, closed
// when every choice has ended. Each choice's tokens come in order. ctx's
// end cancels the sequences; the caller cancels it when it stops reading.
func (s *Server) start(ctx context.Context, m *model, reqs []runtime.Request, n int) (<-chan event, error) {
	info(ctx).model = m.name
	total := len(reqs) * n
	if err := s.admit(m, total); err != nil {
		return nil, err
	}
	var streams []*runtime.Stream
	for _, req := range reqs {
		if s.scripted != nil {
			req = s.scripted(req)
		}
		sts, err := m.eng.StartN(ctx, req, n)
		if err != nil {
			for _, st := range streams {
				st.Cancel()
			}
			m.seqs.Add(-int64(total))
			return nil, err
		}
		streams = append(streams, sts...)
	}
	ch := make(chan event, 64)
	done := make(chan struct{})
	for i, st := range streams {
		go func() {
			defer func() { done <- struct{}{} }()
			var last time.Time
			for {
				toks, ok := st.NextAll(nil)
				if !ok {
					break
				}
				for _, t := range toks {
					if t.ID < 0 {
						continue
					}
					if !last.IsZero() {
						s.metrics.itl.WithLabelValues(m.name).Observe(t.Time.Sub(last).Seconds())
					}
					last = t.Time
				}
				select {
				case ch <- event{choice: i, toks: toks}:
				case <-ctx.Done():
				}
			}
			<-st.Done()
			m.seqs.Add(-1)
			stats := st.Stats()
			s.metrics.finished(m.name, stats, st.Err())
			select {
			case ch <- event{choice: i, end: true, stats: stats, err: st.Err()}:
			case <-ctx.Done():
			}
		}()
	}
	go func() {
		for range streams {
			<-done
		}
		close(ch)
	}()
	return ch, nil
}

// finishReason is OpenAI's name for how a choice ended.
func finishReason(st runtime.Stats) *string {
	r := "length"
	if st.StoppedAtEOS || st.Stop != "" || st.Complete {
		r = "stop"
	}
	return &r
}

// bytesOf lists b as the integers OpenAI's logprobs "bytes" hold.
func bytesOf(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// finite replaces -Inf (a token the model rules out) by the most negative
// float32, since JSON has no infinities.
func finite(x float32) float32 {
	if math.IsInf(float64(x), -1) || math.IsNaN(float64(x)) {
		return -math.MaxFloat32
	}
	return x
}

func completionID(prefix string, ctx context.Context) string {
	return fmt.Sprintf("%s-%s", prefix, requestID(ctx))
}
