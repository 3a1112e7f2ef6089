package gpu

import (
	"testing"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// TestNarrowChoice checks which adapters take the narrow workgroups by
// default (SwiftShader, by the names it gives natively and in Chromium)
// and that their self-check ladder can give them up.
func TestNarrowChoice(t *testing.T) {
	for _, tc := range []struct {
		info webgpu.Info
		want bool
	}{
		{webgpu.Info{Adapter: "SwiftShader Device (Subzero)", DeviceType: "cpu"}, true},
		{webgpu.Info{Adapter: "google swiftshader", Vendor: "google", Architecture: "swiftshader", DeviceType: "cpu"}, true},
		{webgpu.Info{Adapter: "llvmpipe (LLVM 15.0.6, 256 bits)", Driver: "llvmpipe", DeviceType: "cpu"}, false},
		{webgpu.Info{Adapter: "NVIDIA H100 80GB HBM3", DeviceType: "discrete"}, false},
	} {
		b := &Backend{info: tc.info, onSwiftShader: swiftShader(tc.info)}
		if got := b.narrow(); got != tc.want {
			t.Errorf("%q: narrow %v, want %v", tc.info.Adapter, got, tc.want)
		}
		for plan, want := range map[string]bool{"narrow": true, "wide": false} {
			b.plan.Workgroups = plan
			if got := b.narrow(); got != want {
				t.Errorf("%q with Workgroups %q: narrow %v", tc.info.Adapter, plan, got)
			}
		}
		b.plan = Plan{}
		lane := tc.info.DeviceType == "cpu"
		if got := b.ropeAttention(); got != (tc.want && lane) {
			t.Errorf("%q: rope composed with attention %v, want %v", tc.info.Adapter, got, tc.want && lane)
		}
		for plan, want := range map[string]bool{"on": lane, "off": false} {
			b.plan.RopeAttend = plan
			if got := b.ropeAttention(); got != want {
				t.Errorf("%q with RopeAttend %q: rope composed with attention %v", tc.info.Adapter, plan, got)
			}
		}
		rungs := Plainer(Plan{}, tc.info)
		gives, apart := false, false
		for _, r := range rungs {
			gives = gives || r.Plan.Workgroups == "wide"
			apart = apart || r.Plan.RopeAttend == "off"
		}
		if gives != tc.want || apart != tc.want {
			t.Errorf("%q: a rung with wide workgroups %v, with rope apart from attention %v, want %v", tc.info.Adapter, gives, apart, tc.want)
		}
	}
}
