package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// Loading and unloading LoRA adapters at run time, in vLLM's shape
// (POST /v1/load_lora_adapter and /v1/unload_lora_adapter, which vLLM
// gates behind VLLM_ALLOW_RUNTIME_LORA_UPDATING): off unless
// Options.AllowRuntimeLoRA. A client naming a path is still not trusted
// with the server's files: a load reads only from Options.LoRADir, the
// path resolved inside it with os.Root (a relative path, or an absolute
// one under the directory; no "..", no symlink leading out), each file
// opened non-blocking and checked to be a regular file of at most
// Options.MaxLoRABytes (lora.OpenIn), so a FIFO or a device is refused at
// once. What is wrong is answered 400 naming the file and the fault,
// never the file's bytes. A loaded adapter is served as BASE:NAME at
// once; an unloaded one stops taking requests at once and is freed when
// its running sequences finish (runtime.Engine.UnloadAdapter).

// loraRequest is the body of both endpoints. BaseModelName (vLLM's name
// for it in --lora-modules) picks the engine when the server has several.
type loraRequest struct {
	LoRAName      string `json:"lora_name"`
	LoRAPath      string `json:"lora_path"`
	BaseModelName string `json:"base_model_name"`
}

func (s *Server) loadLoRA(w http.ResponseWriter, r *http.Request) error {
	req, m, err := s.loraRequest(r)
	if err != nil {
		return err
	}
	if req.LoRAPath == "" {
		return badRequest("lora_path", "both lora_name and lora_path must be given")
	}
	if s.opts.LoRADir == "" {
		return &httpError{status: http.StatusForbidden, kind: "invalid_request_error",
			msg: "this server has no directory to load LoRA adapters from (tessera serve --lora-dir DIR names one)"}
	}
	name, err := s.loraName(req.LoRAPath)
	if err != nil {
		return err
	}
	a, err := s.openLoRA(name, m)
	if err == nil {
		err = m.eng.AddAdapter(req.LoRAName, a, 1)
	}
	if err != nil {
		switch {
		case errors.Is(err, runtime.ErrAdapterExists):
			return badRequest("lora_name", "the LoRA adapter %q is already loaded on %s", req.LoRAName, m.name)
		case errors.Is(err, lora.ErrBadAdapter), errors.Is(err, lora.ErrRefusedPath), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
			return badRequest("lora_path", "%v", err)
		}
		return fmt.Errorf("load the LoRA adapter %s: %w", req.LoRAPath, err)
	}
	s.opts.Logger.Info("lora adapter loaded", "request_id", requestID(r.Context()), "model", m.name+":"+req.LoRAName, "path", req.LoRAPath)
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.LoRAName))
	return nil
}

// loraName is lora_path as a name inside LoRADir: a relative path as it
// is, an absolute one made relative to the directory when it lies under
// it. Whether the name stays inside (no "..", no symlink out) is
// os.Root's to check as it opens it.
func (s *Server) loraName(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return path, nil
	}
	dir, err := filepath.Abs(s.opts.LoRADir)
	if err != nil {
		return "", fmt.Errorf("the adapter directory: %w", err)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	if err != nil || !filepath.IsLocal(rel) {
		return "", badRequest("lora_path", "lora_path %q is outside the adapter directory %s; adapters are loaded only from there", path, s.opts.LoRADir)
	}
	return rel, nil
}

// openLoRA reads the adapter at name inside LoRADir for m's model. The
// directory is opened per load, so that one replaced (a volume mounted
// anew) is the one read.
func (s *Server) openLoRA(name string, m *model) (*lora.Adapter, error) {
	root, err := os.OpenRoot(s.opts.LoRADir)
	if err != nil {
		return nil, fmt.Errorf("open the adapter directory: %w", err)
	}
	defer root.Close()
	return lora.OpenIn(root, name, m.eng.Model().Config, s.opts.MaxLoRABytes)
}

func (s *Server) unloadLoRA(w http.ResponseWriter, r *http.Request) error {
	req, m, err := s.loraRequest(r)
	if err != nil {
		return err
	}
	if err := m.eng.UnloadAdapter(req.LoRAName); err != nil {
		if errors.Is(err, runtime.ErrUnknownAdapter) {
			code := "lora_not_found"
			return &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code,
				msg: fmt.Sprintf("the LoRA adapter %q is not loaded on %s", req.LoRAName, m.name)}
		}
		return err
	}
	s.opts.Logger.Info("lora adapter unloaded", "request_id", requestID(r.Context()), "model", m.name+":"+req.LoRAName)
	writeText(w, fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.LoRAName))
	return nil
}

// loraRequest reads and checks the body of a load or unload, and finds
// the base model it is for.
func (s *Server) loraRequest(r *http.Request) (loraRequest, *model, error) {
	var req loraRequest
	if !s.opts.AllowRuntimeLoRA {
		return req, nil, &httpError{status: http.StatusForbidden, kind: "invalid_request_error",
			msg: "loading LoRA adapters at run time is off on this server (tessera serve --allow-runtime-lora turns it on)"}
	}
	if err := decode(r, &req); err != nil {
		return req, nil, err
	}
	switch {
	case req.LoRAName == "":
		return req, nil, badRequest("lora_name", "lora_name is required")
	case strings.ContainsAny(req.LoRAName, ": \t\n/"):
		return req, nil, badRequest("lora_name", "lora_name %q may not hold ':', '/' or spaces (requests name it BASE:%s)", req.LoRAName, req.LoRAName)
	}
	m, err := s.model(req.BaseModelName, r.URL.Path)
	if err != nil {
		return req, nil, err
	}
	if m.adapter != "" {
		return req, nil, badRequest("base_model_name", "%s is an adapter, not a base model", m.name)
	}
	return req, m, nil
}

func writeText(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintln(w, text)
}

// loraRef is an entry of a request's "lora" list (wire.LoRARef): a
// loaded adapter of the model by name or by id, and its scale. Several
// apply together, y = x·W + Σ s_j·(x·A_j)·B_j.
type loraRef = wire.LoRARef

// requestAdapters is what a request of this model with the lora list
// runs with: the list on a base model, else the adapter of a BASE:ADAPTER
// name (the two do not mix).
func (m *model) requestAdapters(list []loraRef) ([]runtime.AdapterRef, error) {
	if len(list) == 0 {
		return m.adapters(), nil
	}
	if m.adapter != "" {
		return nil, badRequest("lora", "the model %s already names its adapter; give lora with the base model, or neither", m.name)
	}
	var loaded []string
	for _, a := range m.eng.Adapters() {
		if !a.Unloading {
			loaded = append(loaded, a.Name)
		}
	}
	named := make([]wire.Adapter, len(list))
	for i, l := range list {
		name := l.Name
		switch {
		case l.ID != nil && name != "":
			return nil, badRequest("lora", "lora[%d] gives both an id and a name", i)
		case l.ID != nil:
			if *l.ID < 0 || *l.ID >= len(loaded) {
				return nil, badRequest("lora", "lora[%d]: no adapter has id %d; %s has %d (ids 0 to n-1, in /v1/models' order)", i, *l.ID, m.name, len(loaded))
			}
			name = loaded[*l.ID]
		case name == "":
			return nil, badRequest("lora", "lora[%d] needs an id or a name", i)
		case !slices.Contains(loaded, name):
			code, param := "lora_not_found", "lora"
			return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code, param: &param,
				msg: fmt.Sprintf("lora[%d]: the LoRA adapter %q is not loaded on %s", i, name, m.name)}
		}
		named[i] = wire.Adapter{Name: name, Scale: 1}
		if l.Scale != nil {
			named[i].Scale = *l.Scale
		}
	}
	// Named, listed once, scaled within bounds: as every home checks.
	return wire.Adapters("lora", named)
}
