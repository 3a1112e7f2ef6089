package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// POST /v1/responses is OpenAI's Responses API: a conversation given as
// input items (messages, function calls and their outputs, reasoning), or
// continued from a stored response (previous_response_id), goes through
// the model's chat template like a chat request (newConversation), and
// the reply comes back as output items: reasoning, a message, function
// calls. What a request of Chat Completions names otherwise here
// (max_tokens, response_format, n) is refused with the name to use;
// Tessera's extensions of the other endpoints (seed, top_k, grammar, ...)
// are taken alike. The output is made in responses_output.go, and kept in
// the server's store (responses_store.go).

// The request is wire's (wire.ResponsesRequest), read as every home
// reads requests.
type (
	responsesRequest = wire.ResponsesRequest
	inputItem        = wire.InputItem
	responseTool     = wire.ResponsesTool
	responseText     = wire.ResponsesText
	responseFormat   = wire.TextFormat
)

// responseConversation makes a request's conversation ready to run (as a
// chat request's, newConversation): the model, the sampling fields, the
// conversation it continues and its input, the instructions first, the
// template's variables, the tools. It returns the conversation's items
// too (less the instructions), which the response stores.
func (s *Server) responseConversation(ctx context.Context, path string, body *responsesRequest) (*model, *conversation, []inputItem, error) {
	m, err := s.model(body.Model, path)
	if err != nil {
		return nil, nil, nil, err
	}
	sp := body.Sampling
	sp.MaxTokens, sp.ResponseFormat = body.MaxOutputTokens, body.Format()
	req, _, err := sp.Request(m.eng.Model().Config.Context, 1)
	if pe, ok := wire.AsParam(err); ok && pe.Param == "response_format" {
		return nil, nil, nil, badRequest("text.format", "%s", pe.Msg)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if req.Adapters, err = m.requestAdapters(body.LoRA); err != nil {
		return nil, nil, nil, err
	}
	items, err := s.previous(body.PreviousResponseID)
	if err != nil {
		return nil, nil, nil, err
	}
	items = append(items, body.Input.Items...)
	msgs, images, err := wire.InputMessages(items)
	if err != nil {
		return nil, nil, nil, err
	}
	for i, u := range images {
		img, err := s.imageReader().Read(ctx, u)
		if err != nil {
			return nil, nil, nil, badRequest("input", "image %d: %v", i, err)
		}
		req.Images = append(req.Images, img)
	}
	if len(msgs) == 0 {
		return nil, nil, nil, badRequest("input", "input is required: a string, or an array of input items")
	}
	if body.Instructions != nil && *body.Instructions != "" {
		msgs = append([]chat.Message{{Role: "system", Content: *body.Instructions}}, msgs...)
	}
	req.Messages = msgs
	effort := ""
	if body.Reasoning != nil && body.Reasoning.Effort != nil {
		effort = *body.Reasoning.Effort
	}
	if req.TemplateVars, err = wire.TemplateVars(body.ChatTemplateKwargs, effort); err != nil {
		return nil, nil, nil, err
	}
	tools, choice, err := body.ChatTools()
	if err != nil {
		return nil, nil, nil, err
	}
	if body.ForcesTools() && req.Constraint != nil {
		return nil, nil, nil, badRequest("tool_choice", "a tool_choice that requires a call cannot be combined with text.format json_object or json_schema, or a grammar")
	}
	conv, err := newConversation(ctx, m, req, tools, choice, body.Parallel())
	if err != nil {
		return nil, nil, nil, err
	}
	return m, conv, items, nil
}

// previous is the conversation of the stored response id (none for "").
func (s *Server) previous(id string) ([]inputItem, error) {
	if id == "" {
		return nil, nil
	}
	stored, ok := s.stored.get(id)
	if !ok {
		code := "previous_response_not_found"
		param := "previous_response_id"
		return nil, &httpError{status: http.StatusBadRequest, kind: "invalid_request_error", code: &code, param: &param,
			msg: fmt.Sprintf("Previous response with id '%s' not found: it was never stored (store false), deleted, or dropped from this server's store of its %d most recently used responses", id, storeCount)}
	}
	var items []inputItem
	if err := json.Unmarshal(stored.history, &items); err != nil {
		return nil, fmt.Errorf("the stored conversation of %s: %w", id, err)
	}
	return items, nil
}

// getResponse is GET /v1/responses/{id}: a stored response.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error {
	stored, ok := s.stored.get(r.PathValue("id"))
	if !ok {
		return responseNotFound(r.PathValue("id"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(stored.body)
	return nil
}

// deleteResponse is DELETE /v1/responses/{id}.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !s.stored.delete(id) {
		return responseNotFound(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
	return nil
}

func responseNotFound(id string) error {
	return &httpError{status: http.StatusNotFound, kind: "invalid_request_error",
		msg: fmt.Sprintf("Response with id '%s' not found.", id)}
}
