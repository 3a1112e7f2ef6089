package models

import (
	"fmt"
	"io"

	"github.com/tessera-llm/tessera/models/gguf"
)

// OpenReader reads the description of a GGUF model from r, which holds size
// bytes: a model that is not a file on disk, such as a Blob in a browser.
// name labels the model in errors and in Model.Path. Tensors are read
// through r when asked for, so r must stay readable until the model is
// closed; Close does not close r.
func OpenReader(r io.ReaderAt, size int64, name string) (*Model, error) {
	f, err := gguf.Read(r, size)
	if err != nil {
		return nil, fmt.Errorf("open model %s (only GGUF files can be read this way): %w", name, err)
	}
	m, err := modelFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w", name, err)
	}
	m.Path = name
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("open model %s: %w", name, err)
	}
	return m, nil
}
