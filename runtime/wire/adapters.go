package wire

import (
	"math"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// MaxAdapterScale bounds a request's adapter scale: past it, an
// adapter's term swamps the weights' and the logits are noise or
// overflow.
const MaxAdapterScale = 1000

// Adapter is a LoRA adapter a request names, in no dialect's terms: the
// server's lora list (after its ids are resolved to names), the browser's
// options.adapters and the plugin ABI's adapters all come to a list of
// them.
type Adapter struct {
	Name string
	// Scale multiplies the scale the adapter was loaded with; 0 leaves
	// the adapter out (a dialect whose 0 means 1, as the plugin ABI's,
	// says so when it reads it).
	Scale float64
}

// Adapters checks the adapters a request names, its field param ("lora",
// "adapters"): each is named, listed once, with a finite scale within
// ±MaxAdapterScale. Whether the model has them is the engine's to say
// (runtime.ErrUnknownAdapter), or the server's, which lists them.
func Adapters(param string, list []Adapter) ([]runtime.AdapterRef, error) {
	var refs []runtime.AdapterRef
	seen := map[string]bool{}
	for i, a := range list {
		switch {
		case a.Name == "":
			return nil, paramError(param, "%s[%d] needs a name", param, i)
		case seen[a.Name]:
			return nil, paramError(param, "%s[%d]: the adapter %q is listed twice", param, i, a.Name)
		case !(math.Abs(a.Scale) <= MaxAdapterScale): // NaN too
			return nil, paramError(param, "%s[%d]: scale %v is outside [-%d, %d]", param, i, a.Scale, MaxAdapterScale, MaxAdapterScale)
		}
		seen[a.Name] = true
		if a.Scale != 0 {
			refs = append(refs, runtime.AdapterRef{Name: a.Name, Scale: float32(a.Scale)})
		}
	}
	return refs, nil
}

// PluginAdapters are the plugin ABI's adapters, whose scale 0 (or
// absent) means 1.
func PluginAdapters(list []abi.Adapter) []Adapter {
	out := make([]Adapter, len(list))
	for i, a := range list {
		out[i] = Adapter{Name: a.Name, Scale: float64(a.Scale)}
		if a.Scale == 0 {
			out[i].Scale = 1
		}
	}
	return out
}
