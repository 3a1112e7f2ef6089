package runtime

import (
	"errors"

	"github.com/tessera-llm/tessera/models"
)

// The errors a caller may need to tell apart, all returned wrapped: test
// them with errors.Is.
var (
	// ErrModelNotFound: there is no model file at the path.
	ErrModelNotFound = models.ErrNotFound
	// ErrUnsupportedArch: the model's architecture has no forward pass here.
	ErrUnsupportedArch = models.ErrUnsupportedArch
	// ErrUnknownFormat: the file is neither GGUF nor a llama2.c checkpoint.
	ErrUnknownFormat = models.ErrUnknownFormat
	// ErrBadRequest: a request that can never run as given (bad sampling
	// options, a token outside the vocabulary, an empty prompt, a chat
	// template that refuses the messages).
	ErrBadRequest = errors.New("invalid request")
	// ErrEngineClosed: the engine was closed before or while the request
	// ran.
	ErrEngineClosed = errors.New("engine closed")
)

// ErrContextFull, ErrOutOfKV, ErrDraftVocab and ErrDraftTooLarge are
// declared beside the code that returns them, and ErrDeviceLost and
// ErrNoAdapter, the WebGPU backend's, in device.go.
