package server

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
)

// Embedding models are served beside the generative ones: POST
// /v1/embeddings (OpenAI's shape) and POST /v1/rerank (the shape of
// llama.cpp's server, Jina and Cohere), from runtime.Embedder.

// maxEmbedInputs bounds the inputs of one request, as OpenAI does.
const maxEmbedInputs = 2048

// embedModel is one served embedder.
type embedModel struct {
	name    string
	emb     *runtime.Embedder
	created int64
}

// AddEmbedder serves emb under name on /v1/embeddings, or on /v1/rerank
// for a reranker; it is listed by /v1/models like the engines.
func (s *Server) AddEmbedder(name string, emb *runtime.Embedder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		return errors.New("server: a model needs a name")
	}
	if _, ok := s.models[name]; ok {
		return fmt.Errorf("server: model %q added twice", name)
	}
	if s.embedders == nil {
		s.embedders = map[string]*embedModel{}
	}
	if _, ok := s.embedders[name]; ok {
		return fmt.Errorf("server: model %q added twice", name)
	}
	s.embedders[name] = &embedModel{name: name, emb: emb, created: time.Now().Unix()}
	s.embedNames = append(s.embedNames, name)
	return nil
}

func (m *embedModel) card() modelCard {
	return modelCard{ID: m.name, Object: "model", Created: m.created, OwnedBy: "tessera", MaxModelLen: m.emb.Model().Config.Context}
}

// embedder finds the embedder a request names; with one, an empty name
// means it. A generative model's name says what that model serves,
// rather than that it is no embedding model.
func (s *Server) embedder(name string, rerank bool) (*embedModel, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	endpoint := "/v1/embeddings"
	if rerank {
		endpoint = "/v1/rerank"
	}
	m, ok := s.embedders[name]
	if !ok && name == "" && len(s.embedNames) == 1 {
		m, ok = s.embedders[s.embedNames[0]], true
	}
	if _, gen := s.models[name]; gen && !ok {
		code := "model_not_supported"
		msg := fmt.Sprintf("the model %q is a generative model; it serves /v1/chat/completions and /v1/completions, not %s", name, endpoint)
		if len(s.embedNames) == 0 {
			msg += "; this server has no embedding models"
		} else {
			msg += "; this server's embedding models are " + strings.Join(s.embedNames, ", ")
		}
		return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code, msg: msg}
	}
	switch {
	case len(s.embedNames) == 0:
		code := "model_not_found"
		return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code,
			msg: fmt.Sprintf("this server has no embedding models for %s; its models (%s) are generative, served on /v1/chat/completions and /v1/completions",
				endpoint, strings.Join(s.names, ", "))}
	case !ok && name == "":
		return nil, badRequest("model", "a model is required: one of %s", strings.Join(s.embedNames, ", "))
	case !ok:
		code := "model_not_found"
		return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code,
			msg: fmt.Sprintf("the model %q does not exist; this server's embedding models are %s", name, strings.Join(s.embedNames, ", "))}
	case rerank && !m.emb.Reranker():
		return nil, badRequest("model", "the model %q is an embedding model, not a reranker: use /v1/embeddings", m.name)
	case !rerank && m.emb.Reranker():
		return nil, badRequest("model", "the model %q is a reranker: use /v1/rerank", m.name)
	}
	return m, nil
}

// embeddingInput is OpenAI's input: a string, an array of strings, an
// array of token ids or an array of arrays of them.
type embeddingInput struct {
	texts  []string
	tokens [][]int32
}

func (in *embeddingInput) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	var s string
	if json.Unmarshal(data, &s) == nil {
		in.texts = []string{s}
		return nil
	}
	var ss []string
	if json.Unmarshal(data, &ss) == nil && (len(ss) > 0 || string(data) == "[]") {
		in.texts = ss
		return nil
	}
	var ids []int32
	if json.Unmarshal(data, &ids) == nil {
		in.tokens = [][]int32{ids}
		return nil
	}
	var idss [][]int32
	if json.Unmarshal(data, &idss) == nil {
		in.tokens = idss
		return nil
	}
	return badRequest("input", "input must be a string, an array of strings, an array of token ids or an array of arrays of them")
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32s
}

// embeddings is POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Model          string          `json:"model"`
		Input          *embeddingInput `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
		User           string          `json:"user"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	m, err := s.embedder(body.Model, false)
	if err != nil {
		return err
	}
	info(r.Context()).model, info(r.Context()).user = m.name, body.User
	if body.EncodingFormat != "" && body.EncodingFormat != "float" && body.EncodingFormat != "base64" {
		return badRequest("encoding_format", "encoding_format must be float or base64, not %q", body.EncodingFormat)
	}
	dim := m.emb.Dim()
	if body.Dimensions != nil {
		if *body.Dimensions < 1 || *body.Dimensions > dim {
			return badRequest("dimensions", "dimensions must be in 1..%d", dim)
		}
		dim = *body.Dimensions
	}
	if body.Input == nil {
		return badRequest("input", "input is required")
	}
	inputs := body.Input.tokens
	if body.Input.texts != nil {
		for i, t := range body.Input.texts {
			if t == "" {
				return badRequest("input", "input %d is an empty string", i)
			}
			ids, err := m.emb.TokenizeContext(r.Context(), t)
			if err != nil {
				return fmt.Errorf("input %d: %w", i, err)
			}
			inputs = append(inputs, ids)
		}
	}
	if len(inputs) == 0 || len(inputs) > maxEmbedInputs {
		return badRequest("input", "input must hold 1..%d inputs, not %d", maxEmbedInputs, len(inputs))
	}
	vocab, tokens := m.emb.Tokenizer().VocabSize(), 0
	for i, in := range inputs {
		if len(in) == 0 {
			return badRequest("input", "input %d has no tokens", i)
		}
		for _, id := range in {
			if id < 0 || int(id) >= vocab {
				return badRequest("input", "input %d: token %d is outside the vocabulary of %d", i, id, vocab)
			}
		}
		tokens += len(in)
	}
	vecs, err := m.emb.EmbedTokens(r.Context(), inputs, true)
	if err != nil {
		return err
	}
	data := make([]embeddingData, len(vecs))
	for i, v := range vecs {
		if dim < len(v) { // a shorter embedding: the leading values, normalised again (Matryoshka)
			v = v[:dim]
			runtime.L2Normalize(v)
		}
		data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if body.EncodingFormat == "base64" {
			raw := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(raw)
		}
	}
	info(r.Context()).usage = usage{PromptTokens: tokens, TotalTokens: tokens}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": m.name,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
	return nil
}

// rerankDocument is a document to rank: a string, or Cohere's {"text": …}.
type rerankDocument string

func (d *rerankDocument) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*d = rerankDocument(s)
		return nil
	}
	var o struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(data, &o) == nil && o.Text != nil {
		*d = rerankDocument(*o.Text)
		return nil
	}
	return badRequest("documents", "a document must be a string or an object with a text")
}

type rerankResult struct {
	Index          int               `json:"index"`
	RelevanceScore float64           `json:"relevance_score"`
	Document       map[string]string `json:"document,omitempty"`
}

// rerank is POST /v1/rerank: the documents ordered by the reranker's
// score for the query, the top_n first.
func (s *Server) rerank(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Model           string           `json:"model"`
		Query           *string          `json:"query"`
		Documents       []rerankDocument `json:"documents"`
		TopN            *int             `json:"top_n"`
		ReturnDocuments bool             `json:"return_documents"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	m, err := s.embedder(body.Model, true)
	if err != nil {
		return err
	}
	info(r.Context()).model = m.name
	switch {
	case body.Query == nil:
		return badRequest("query", "query is required")
	case len(body.Documents) == 0 || len(body.Documents) > maxEmbedInputs:
		return badRequest("documents", "documents must hold 1..%d documents, not %d", maxEmbedInputs, len(body.Documents))
	case body.TopN != nil && *body.TopN < 1:
		return badRequest("top_n", "top_n must be positive")
	}
	docs := make([]string, len(body.Documents))
	tokens := 0
	wp, _ := m.emb.Tokenizer().(*tokenizer.WordPiece)
	for i, d := range body.Documents {
		docs[i] = string(d)
		if wp != nil {
			ids, _ := wp.EncodePair(*body.Query, docs[i])
			tokens += len(ids)
		}
	}
	scores, err := m.emb.Rerank(r.Context(), *body.Query, docs)
	if err != nil {
		return err
	}
	results := make([]rerankResult, len(scores))
	for i, sc := range scores {
		results[i] = rerankResult{Index: i, RelevanceScore: float64(sc)}
		if body.ReturnDocuments {
			results[i].Document = map[string]string{"text": docs[i]}
		}
	}
	slices.SortStableFunc(results, func(a, b rerankResult) int { return cmp.Compare(b.RelevanceScore, a.RelevanceScore) })
	if body.TopN != nil && *body.TopN < len(results) {
		results = results[:*body.TopN]
	}
	info(r.Context()).usage = usage{PromptTokens: tokens, TotalTokens: tokens}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": m.name, "results": results,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
	return nil
}
