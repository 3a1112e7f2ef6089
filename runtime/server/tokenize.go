package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
)

// tokenize is POST /tokenize (vLLM's shape): a prompt, or chat messages
// rendered with the template, to the ids a request would run.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Model            string        `json:"model"`
		Prompt           *string       `json:"prompt"`
		Messages         []chatMessage `json:"messages"`
		AddSpecialTokens *bool         `json:"add_special_tokens"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	m, err := s.model(body.Model, r.URL.Path)
	if err != nil {
		return err
	}
	var ids []int32
	switch {
	case body.Prompt != nil && body.Messages != nil:
		return badRequest("prompt", "give prompt or messages, not both")
	case body.Messages != nil:
		var req runtime.Request
		for _, msg := range body.Messages {
			req.Messages = append(req.Messages, chat.Message{Role: msg.Role, Content: msg.Content.Text})
		}
		if ids, err = m.eng.PromptTokensContext(r.Context(), req); err != nil {
			// Past the context, or the request's time ran out (or Drain
			// cut it): not a fault of the messages.
			if errors.Is(err, runtime.ErrContextFull) || r.Context().Err() != nil {
				return err
			}
			return badRequest("messages", "%v", err)
		}
	case body.Prompt != nil:
		// A text is tokenized as far as the context holds, as a prompt is:
		// ids past it are no use to the model, and the bound keeps a
		// body of megabytes from costing hundreds of megabytes.
		ctxLen := m.eng.Model().Config.Context
		enc, err := tokenizer.EncodeBounded(r.Context(), m.eng.Tokenizer(), *body.Prompt, body.AddSpecialTokens == nil || *body.AddSpecialTokens, ctxLen)
		switch {
		case errors.Is(err, tokenizer.ErrTooLong):
			return fmt.Errorf("%w: the text has more tokens than the context of %d holds", runtime.ErrContextFull, ctxLen)
		case err != nil:
			return err
		}
		for _, id := range enc {
			ids = append(ids, int32(id))
		}
	default:
		return badRequest("prompt", "prompt or messages is required")
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": nonNil(ids), "count": len(ids), "max_model_len": m.eng.Model().Config.Context})
	return nil
}

// detokenize is POST /detokenize: ids back to text.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Model  string  `json:"model"`
		Tokens []int32 `json:"tokens"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	m, err := s.model(body.Model, r.URL.Path)
	if err != nil {
		return err
	}
	vocab := m.eng.Tokenizer().VocabSize()
	ids := make([]int, len(body.Tokens))
	for i, id := range body.Tokens {
		if id < 0 || int(id) >= vocab {
			return badRequest("tokens", "token %d is outside the vocabulary of %d", id, vocab)
		}
		ids[i] = int(id)
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": m.eng.Tokenizer().Decode(ids)})
	return nil
}
