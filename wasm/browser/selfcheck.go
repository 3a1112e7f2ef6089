//go:build js

package main

import (
	"errors"
	"syscall/js"

	"github.com/tessera-llm/tessera/runtime"
)

// selfCheckFolder holds the self-check's results in the origin private
// file system, apart from the model cache (cacheFolder).
const selfCheckFolder = "tessera-selfcheck"

// opfsSelfChecks is a runtime.SelfCheckCache in the origin private file
// system: a small JSON file per key, so that a page loaded again on the
// same adapter and driver skips the check. Where there is no such storage
// (Node, a page outside a worker) it keeps nothing.
type opfsSelfChecks struct{}

func (opfsSelfChecks) dir() (js.Value, error) {
	storage := js.Global().Get("navigator").Get("storage")
	if storage.IsUndefined() || storage.Get("getDirectory").IsUndefined() {
		return js.Value{}, errors.New("no origin private file system")
	}
	root, err := call(storage, "getDirectory")
	if err != nil {
		return js.Value{}, err
	}
	return call(root, "getDirectoryHandle", selfCheckFolder, map[string]any{"create": true})
}

func (c opfsSelfChecks) Get(key string) ([]byte, bool) {
	dir, err := c.dir()
	if err != nil {
		return nil, false
	}
	fh, err := call(dir, "getFileHandle", key+".json")
	if err != nil {
		return nil, false
	}
	file, err := call(fh, "getFile")
	if err != nil {
		return nil, false
	}
	text, err := call(file, "text")
	if err != nil {
		return nil, false
	}
	return []byte(text.String()), true
}

func (c opfsSelfChecks) Put(key string, data []byte) error {
	dir, err := c.dir()
	if err != nil {
		return err
	}
	fh, err := call(dir, "getFileHandle", key+".json", map[string]any{"create": true})
	if err != nil {
		return err
	}
	w, err := call(fh, "createWritable")
	if err != nil {
		return err
	}
	if _, err := call(w, "write", string(data)); err != nil {
		jsCall(w, "abort")
		return err
	}
	_, err = call(w, "close")
	return err
}

// selfCheckInfo is a self-check's report as the JS API gives it
// (ModelInfo.selfCheck).
func selfCheckInfo(c runtime.SelfCheck) map[string]any {
	failed := []any{}
	for _, f := range c.Failed {
		failed = append(failed, map[string]any{"plan": f.Plan, "error": f.Error})
	}
	kernels := []any{}
	for _, k := range c.Kernels {
		kernels = append(kernels, k)
	}
	return map[string]any{"status": c.Status(), "adapter": c.Adapter, "driver": c.Driver, "plan": c.Plan,
		"failed": failed, "kernels": kernels, "skipped": c.Skipped, "cached": c.Cached, "ms": ms(c.Elapsed)}
}
