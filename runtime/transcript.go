package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// A transcript is what a generation was, written down so that it can be
// recomputed anywhere and a run that departs from it found at the token
// where it does: the model's file hash and the adapters, the prompt's
// ids as rendered, the sampling parameters and seed, the output ids with
// each token's log-probability, and the engine and backend that made it.
// Whether another run must give the same tokens is the reproducibility
// contract's question (docs/DECISIONS.md): Fingerprint says which
// runs it binds.

// TranscriptVersion is the version of the transcript's format.
const TranscriptVersion = 1

// Transcript is one generation, written down.
type Transcript struct {
	Version int `json:"version"`
	// Engine is Tessera's version (the module's, and its commit when
	// built from a checkout); Backend names the device and its kernels;
	// Fingerprint sums up both, as OpenAI's system_fingerprint.
	Engine      string `json:"engine"`
	Backend     string `json:"backend"`
	Fingerprint string `json:"system_fingerprint"`
	Model       struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256,omitempty"`
		Quant  string `json:"weights,omitempty"` // the stored formats, e.g. "int4 87%, f32 13%"
	} `json:"model"`
	Adapters   []TranscriptAdapter `json:"adapters,omitempty"`
	Prompt     []int32             `json:"prompt"`
	MaxTokens  int                 `json:"max_tokens"`
	Sampler    SamplerOptions      `json:"sampler"`
	Stop       []string            `json:"stop,omitempty"`
	IgnoreEOS  bool                `json:"ignore_eos,omitempty"`
	Constraint string              `json:"constraint,omitempty"` // the grammar's GBNF
	Output     []int32             `json:"output"`
	Logprobs   []float32           `json:"logprobs"`
	Finish     string              `json:"finish"` // stop, eos, length, complete, max_tokens
}

// TranscriptAdapter is an adapter a generation ran with.
type TranscriptAdapter struct {
	Name  string  `json:"name"`
	Scale float32 `json:"scale"`
}

// Version is Tessera's version as its build records it: the module's
// version, and the commit of a build from a checkout.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "tessera (unknown build)"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += "+dirty"
		}
	}
	return "tessera " + v
}

// BackendName names the engine's device and the kernels it runs: "cpu
// avx2", or "webgpu:ADAPTER (BACKEND)".
func (e *Engine) BackendName() string {
	d := backend.Describe(e.be)
	if d.Kernels != "" {
		return d.Device + " " + d.Kernels
	}
	return d.Device
}

// Fingerprint names what the reproducibility contract binds, as OpenAI's
// system_fingerprint: the engine's version, its device (for the CPU just
// "cpu": every kernel path gives the Go twins' bits; for WebGPU the
// adapter), and how its weights and KV cache are stored. Two runs with
// equal fingerprints are bound by the contract's strongest terms
// (docs/DECISIONS.md, "The reproducibility contract").
func (e *Engine) Fingerprint() string {
	parts := []string{Version(), e.DeviceName(), e.weightsSummary(), e.KVType().String()}
	if c, ok := e.SelfCheck(); ok && c.Passed() && c.Forced != (GPUPlan{}) {
		parts = append(parts, fmt.Sprintf("%+v", c.Forced)) // kernels the self-check chose
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "fp_" + hex.EncodeToString(h[:5])
}

func (e *Engine) weightsSummary() string {
	var parts []string
	for _, u := range e.WeightMix() {
		parts = append(parts, fmt.Sprintf("%v %d tensors", u.Storage, u.Tensors))
	}
	return strings.Join(parts, ", ")
}

// SetModelHash gives the engine its model file's SHA-256 where it
// cannot read the file itself (a model read from memory, as the browser
// reads one, checked against its published hash): transcripts name it.
func (e *Engine) SetModelHash(sha256 string) {
	e.hashOnce.Do(func() { e.hash = sha256 })
}

// ModelHash is the SHA-256 of the model's file, computed once (a model
// read from memory has none, unless SetModelHash gave it: "").
func (e *Engine) ModelHash() (string, error) {
	e.hashOnce.Do(func() {
		if e.model.Path == "" {
			return
		}
		f, err := os.Open(e.model.Path)
		if err != nil {
			e.hashErr = fmt.Errorf("hashing the model: %w", err)
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			e.hashErr = fmt.Errorf("hashing the model: %w", err)
			return
		}
		e.hash = hex.EncodeToString(h.Sum(nil))
	})
	return e.hash, e.hashErr
}

// NewTranscript starts the transcript of req, whose prompt runs as the
// ids prompt (PromptTokens). Its tokens are added with Add as they come:
// req must ask for Logprobs.
func (e *Engine) NewTranscript(req Request, prompt []int32) (*Transcript, error) {
	if !req.Logprobs {
		return nil, fmt.Errorf("%w: a transcript needs the tokens' log-probabilities (Request.Logprobs)", ErrBadRequest)
	}
	hash, err := e.ModelHash()
	if err != nil {
		return nil, err
	}
	t := &Transcript{Version: TranscriptVersion, Engine: Version(), Backend: e.BackendName(), Fingerprint: e.Fingerprint(),
		Prompt: slices.Clone(prompt), MaxTokens: req.MaxTokens, Sampler: req.Sampler, Stop: req.Stop, IgnoreEOS: req.IgnoreEOS}
	t.Model.Name, t.Model.SHA256, t.Model.Quant = filepath.Base(e.model.Path), hash, e.weightsSummary()
	if req.Constraint != nil {
		t.Constraint = req.Constraint.Source()
	}
	for _, a := range req.Adapters {
		s := a.Scale
		if s == 0 {
			s = 1
		}
		t.Adapters = append(t.Adapters, TranscriptAdapter{Name: a.Name, Scale: s})
	}
	return t, nil
}

// Add records a generated token.
func (t *Transcript) Add(tok Token) {
	if tok.ID < 0 {
		return
	}
	t.Output = append(t.Output, tok.ID)
	t.Logprobs = append(t.Logprobs, tok.Logprob)
}

// End records why the generation ended.
func (t *Transcript) End(s Stats) { t.Finish = s.Reason() }

// Request is the generation the transcript records, to run again.
func (t *Transcript) Request() (Request, error) {
	req := Request{Tokens: slices.Clone(t.Prompt), MaxTokens: t.MaxTokens, Sampler: t.Sampler, Stop: t.Stop, IgnoreEOS: t.IgnoreEOS, Logprobs: true}
	if t.Constraint != "" {
		g, err := grammar.Parse(t.Constraint)
		if err != nil {
			return req, fmt.Errorf("transcript: its constraint: %w", err)
		}
		req.Constraint = g
	}
	for _, a := range t.Adapters {
		req.Adapters = append(req.Adapters, AdapterRef{Name: a.Name, Scale: a.Scale})
	}
	return req, nil
}

// Check reports a transcript that no engine of this version replays,
// before a model is loaded for it: another version of the format (a JSON
// file that is no transcript reads as version 0), or log-probabilities
// that are not one a token.
func (t *Transcript) Check() error {
	if t.Version != TranscriptVersion {
		return fmt.Errorf("transcript version %d, this engine reads %d", t.Version, TranscriptVersion)
	}
	if len(t.Logprobs) != len(t.Output) {
		return fmt.Errorf("transcript: %d log-probabilities for %d tokens", len(t.Logprobs), len(t.Output))
	}
	return nil
}

// Replay is what running a transcript again gave.
type Replay struct {
	// Tokens is how many of the transcript's tokens the run gave the same
	// (all of them: the run reproduced it).
	Tokens int
	// Diverged is the index of the first token the run gave otherwise
	// (-1: none), Want the transcript's token there and Got the run's
	// (-1: the run ended before it; Want is -1 when the run went past the
	// transcript's end).
	Diverged  int
	Want, Got int32
	// MaxDelta is the largest difference between the transcript's and the
	// run's log-probability of a token they share, and Deltas each one.
	MaxDelta float64
	Deltas   []float32
	// SameModel: the model's hash is the transcript's; SameFingerprint:
	// so is the engine, backend and storage, which the contract binds.
	SameModel, SameFingerprint bool
}

// ErrTranscriptModel: a transcript names another model than the engine's.
var ErrTranscriptModel = errors.New("the transcript is of another model")

// Replay runs t again on the engine and compares: the first token that
// differs and the log-probability deltas of the tokens before it.
func (e *Engine) Replay(ctx context.Context, t *Transcript) (Replay, error) {
	r := Replay{Diverged: -1}
	if err := t.Check(); err != nil {
		return r, err
	}
	hash, err := e.ModelHash()
	if err != nil {
		return r, err
	}
	r.SameModel = t.Model.SHA256 == "" || hash == "" || hash == t.Model.SHA256
	if !r.SameModel {
		return r, fmt.Errorf("%w: its model's SHA-256 is %s, this one's %s", ErrTranscriptModel, t.Model.SHA256, hash)
	}
	r.SameFingerprint = t.Fingerprint == e.Fingerprint()
	req, err := t.Request()
	if err != nil {
		return r, err
	}
	st, err := e.Start(ctx, req)
	if err != nil {
		return r, err
	}
	i := 0
	for tok, err := range st.Tokens() {
		if err != nil {
			return r, err
		}
		if tok.ID < 0 {
			continue
		}
		if i >= len(t.Output) {
			r.Diverged, r.Want, r.Got = i, -1, tok.ID
			st.Cancel()
			break
		}
		if tok.ID != t.Output[i] {
			r.Diverged, r.Want, r.Got = i, t.Output[i], tok.ID
			st.Cancel()
			break
		}
		d := float32(math.Abs(float64(tok.Logprob - t.Logprobs[i])))
		r.Deltas = append(r.Deltas, d)
		r.MaxDelta = max(r.MaxDelta, float64(d))
		i++
	}
	r.Tokens = i
	if r.Diverged < 0 && i < len(t.Output) {
		r.Diverged, r.Want, r.Got = i, t.Output[i], -1
	}
	return r, nil
}
