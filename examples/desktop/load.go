//go:build cgo

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime"
)

// model is a loaded engine and the file it reads its tensors from.
type model struct {
	*runtime.Engine
	Path string
	file *os.File // nil when runtime.Load opened the file itself
}

// Close closes the engine, then the file behind it.
func (m *model) Close() error {
	err := m.Engine.Close()
	if m.file != nil {
		if cerr := m.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// loadProgress counts the bytes of a model file read so far, so the window
// can show how far loading has got while another goroutine loads.
type loadProgress struct {
	read atomic.Int64
	size atomic.Int64 // 0 while unknown (formats read through runtime.Load)
}

// Fraction is the share of the file read, in [0, 1], or -1 when unknown.
func (p *loadProgress) Fraction() float64 {
	size := p.size.Load()
	if size <= 0 {
		return -1
	}
	return min(float64(p.read.Load())/float64(size), 1)
}

// countingReader is an io.ReaderAt that adds what it reads to a loadProgress.
type countingReader struct {
	r io.ReaderAt
	p *loadProgress
}

func (c countingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.p.read.Add(int64(n))
	return n, err
}

// loadModel loads the model at path onto opts.Device. A GGUF file is read
// through models.OpenReader over a counting reader, so p follows the
// tensors as they are read and uploaded; llama2.c checkpoints (which need
// their tokenizer file found beside them) go through runtime.Load, and p
// stays unknown.
func loadModel(path string, opts runtime.Options, p *loadProgress) (*model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open model: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open model: %w", err)
	}
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte("GGUF")) {
		f.Close()
		e, err := runtime.Load(path, opts)
		if err != nil {
			return nil, err
		}
		return &model{Engine: e, Path: path}, nil
	}
	p.size.Store(st.Size())
	m, err := models.OpenReader(countingReader{f, p}, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	e, err := runtime.LoadModel(m, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &model{Engine: e, Path: path, file: f}, nil
}
