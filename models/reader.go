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
	return OpenParts([]Part{{R: r, Size: size}}, name)
}

// Part is one GGUF file of a model, as a reader of Size bytes.
type Part struct {
	R    io.ReaderAt
	Size int64
}

// OpenParts is OpenReader for a model split into parts by gguf-split
// (NAME-00001-of-00003.gguf…), given in order; one part is a whole file.
func OpenParts(parts []Part, name string) (*Model, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("open model %s: no file", name)
	}
	files := make([]*gguf.File, len(parts))
	for i, p := range parts {
		f, err := gguf.Read(p.R, p.Size)
		if err != nil {
			where := ""
			if len(parts) > 1 {
				where = fmt.Sprintf(" part %d", i+1)
			}
			return nil, fmt.Errorf("open model %s%s (only GGUF files can be read this way): %w", name, where, err)
		}
		files[i] = f
	}
	m, err := modelFromGGUF(files)
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w", name, err)
	}
	m.Path = name
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("open model %s: %w", name, err)
	}
	m.paceReads()
	return m, nil
}
