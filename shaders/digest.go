package shaders

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"sync"
)

// Digest is a hash of every kernel's source: what a result measured on
// the kernels (the engine's load-time self-check) is valid for, in a
// build that carries no version of its own.
var Digest = sync.OnceValue(func() string {
	h := sha256.New()
	names, _ := fs.Glob(files, "*.wgsl") // sorted
	for _, name := range names {
		src, _ := files.ReadFile(name)
		h.Write([]byte(name + "\x00"))
		h.Write(src)
	}
	return hex.EncodeToString(h.Sum(nil))
})
