// Package fileat opens a file for the format readers, which parse through
// an io.ReaderAt of known size and read tensors lazily from it.
package fileat

import (
	"fmt"
	"io"
	"os"
)

// Open opens path and parses it with read. On success the caller owns the
// returned file and closes it when done with the parsed value.
func Open[T any](path string, read func(io.ReaderAt, int64) (T, error)) (T, *os.File, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return zero, nil, err
	}
	v, err := read(f, st.Size())
	if err != nil {
		f.Close()
		return zero, nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, f, nil
}

// ReadBounded reads the whole file at path, failing for one larger than
// limit bytes: the JSON side files of a model folder (config.json, a
// shard index) are small, and a corrupt or hostile one must not make the
// loader read gigabytes.
func ReadBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}
