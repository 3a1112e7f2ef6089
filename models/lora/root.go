package lora

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// ErrRefusedPath is wrapped by OpenIn's errors about a name it will not
// open: one that leaves its directory, or a file that is not a regular
// file or is too large.
var ErrRefusedPath = errors.New("refused adapter path")

// maxPEFTConfig bounds adapter_config.json, a few hundred bytes in
// practice.
const maxPEFTConfig = 1 << 20

// OpenIn reads the adapter at name inside root (a GGUF LoRA file, or a
// PEFT folder), as Open reads a path, for a base model of config c. It is
// Open for paths that someone other than the operator names (a server's
// clients): the name is resolved inside root (os.Root: no "..", no
// absolute path, no symlink leading out), and each file is opened
// non-blocking and checked with fstat to be a regular file of at most
// maxBytes before anything is read from it, so a FIFO or a device is
// refused at once instead of blocking the reader, and what is checked is
// what is read. Its errors name the file and what is wrong with it, and
// never quote the file's bytes. They wrap ErrRefusedPath, ErrBadAdapter,
// fs.ErrNotExist or fs.ErrPermission for what the caller can be told.
func OpenIn(root *os.Root, name string, c models.Config, maxBytes int64) (*Adapter, error) {
	if !filepath.IsLocal(name) {
		return nil, fmt.Errorf("%w: %q is not a path inside the adapter directory", ErrRefusedPath, name)
	}
	f, st, err := openRegular(root, name, name, maxBytes, true)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		a, err := openPEFTIn(root, name, c, maxBytes)
		if errors.Is(err, ErrRefusedPath) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, err // about a file of the folder, which it names
		}
		return checked(a, err, name, c)
	}
	defer f.Close()
	g, err := gguf.Read(f, st.Size())
	var a *Adapter
	if err == nil {
		a, err = readGGUF(g, c)
	}
	return checked(a, err, name, c)
}

// openPEFTIn reads the PEFT folder dir inside root, its two files opened
// as OpenIn opens a file.
func openPEFTIn(root *os.Root, dir string, c models.Config, maxBytes int64) (*Adapter, error) {
	sub, err := root.OpenRoot(dir)
	if err != nil {
		return nil, pathError(dir, err)
	}
	defer sub.Close()
	cf, _, err := openRegular(sub, PEFTConfig, filepath.Join(dir, PEFTConfig), maxPEFTConfig, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("a PEFT adapter folder needs %s", PEFTConfig)
	}
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(cf)
	cf.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PEFTConfig, err)
	}
	var wf *os.File // the weights, once readPEFT has checked the configuration
	defer func() {
		if wf != nil {
			wf.Close()
		}
	}()
	return readPEFT(data, func() (*safetensors.File, error) {
		f, st, err := openRegular(sub, PEFTWeights, filepath.Join(dir, PEFTWeights), maxBytes, false)
		if err != nil {
			return nil, err
		}
		wf = f
		sf, err := safetensors.Read(f, st.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", PEFTWeights, err)
		}
		return sf, nil
	}, c)
}

// openRegular opens name inside root without blocking (a FIFO with no
// writer would block an ordinary open) and checks, on the open file, that
// it is a regular file (or, with dirOK, a directory) of at most maxBytes.
// Errors call it shown.
func openRegular(root *os.Root, name, shown string, maxBytes int64, dirOK bool) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, nil, pathError(shown, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	switch m := st.Mode(); {
	case m.IsDir() && dirOK:
		return f, st, nil
	case !m.IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is %s, not a regular file", ErrRefusedPath, shown, fileKind(m))
	case st.Size() > maxBytes:
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is %d bytes, more than the %d an adapter file may have", ErrRefusedPath, shown, st.Size(), maxBytes)
	}
	return f, st, nil
}

// pathError is an error of os.Root's about the file shown, worded for a
// client: a path that does not exist or may not be read keeps
// fs.ErrNotExist or fs.ErrPermission; any other (a symlink leading out of
// the directory, a component that is not a directory) is a refused path.
func pathError(shown string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist in the adapter directory: %w", shown, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s may not be read: %w", shown, err)
	}
	return fmt.Errorf("%w: %s cannot be opened inside the adapter directory: %w", ErrRefusedPath, shown, err)
}

// fileKind names the kind of file a mode is, for errors.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}
