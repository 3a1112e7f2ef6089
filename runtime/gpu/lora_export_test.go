package gpu

import "github.com/tessera-llm/tessera/runtime/backend"

// LoRAHalves reports whether l keeps its values in halves (tests only).
func LoRAHalves(l backend.LoRA) bool { return l.(*LoRA).half }
