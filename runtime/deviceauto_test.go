package runtime_test

import (
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// TestDeviceAuto: auto takes a hardware adapter, and otherwise the CPU
// backend, saying why: a software adapter (lavapipe in CI) is slower than
// the CPU backend, so it runs only when asked for by name.
func TestDeviceAuto(t *testing.T) {
	infos := gputest.Adapters(t)
	software := true
	for _, i := range infos {
		software = software && i.DeviceType == "cpu"
	}
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "auto", Quant: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	note, name := eng.DeviceNote(), eng.Backend().Name()
	t.Logf("adapters %d, software only %v: %s: %s", len(infos), software, name, note)
	if software {
		if name != "cpu" || !strings.Contains(note, infos[0].Adapter) || !strings.Contains(note, "software") || !strings.Contains(note, "--device webgpu") {
			t.Errorf("with only %s: backend %s, note %q; want the CPU, the adapter named and why", infos[0].Adapter, name, note)
		}
		return
	}
	if name != "webgpu" || !strings.Contains(note, "WebGPU on ") {
		t.Errorf("with a hardware adapter: backend %s, note %q", name, note)
	}
}
