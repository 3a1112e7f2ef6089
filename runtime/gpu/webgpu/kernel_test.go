package webgpu_test

import (
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

func TestSpecialize(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		constants map[string]float64
		want      string // the output, or a substring of the error
		err       bool
	}{
		{"default kept", "override WG: u32 = 64;", nil, "const WG: u32 = 64;", false},
		{"u32", "override WG: u32 = 64;", map[string]float64{"WG": 128}, "const WG: u32 = 128u;", false},
		{"i32", "override K: i32 = 1;", map[string]float64{"K": -3}, "const K: i32 = -3i;", false},
		{"f32", "override EPS: f32 = 1e-5;", map[string]float64{"EPS": 1e-6}, "const EPS: f32 = 1e-06;", false},
		{"f32 integral", "override S: f32 = 0.5;", map[string]float64{"S": 2}, "const S: f32 = 2.0;", false},
		{"bool", "override CAUSAL: bool = false;", map[string]float64{"CAUSAL": 1}, "const CAUSAL: bool = true;", false},
		{"untyped int", "override N = 4;", map[string]float64{"N": 8}, "const N: i32 = 8i;", false},
		{"untyped float", "override X = 1.0;", map[string]float64{"X": 3}, "const X: f32 = 3.0;", false},
		{"untyped u32 suffix kept", "override N = 4u;", nil, "const N: u32 = 4u;", false},
		{"id attribute dropped", "@id(3) override WG: u32 = 64;", map[string]float64{"WG": 32}, "const WG: u32 = 32u;", false},
		{"no default", "override WG: u32;", map[string]float64{"WG": 16}, "const WG: u32 = 16u;", false},
		{"spacing", "override  WG :u32=64 ;", map[string]float64{"WG": 8}, "const WG: u32 = 8u;", false},
		{"comments ignored", "// override A: u32 = 1;\n/* override B: u32 = 2; */\noverride C: u32 = 3;",
			map[string]float64{"C": 4}, "// override A: u32 = 1;\n/* override B: u32 = 2; */\nconst C: u32 = 4u;", false},
		{"not an identifier prefix", "let my_override = 1;", nil, "let my_override = 1;", false},
		{"two overrides", "override A: u32 = 1;\noverride B: f32 = 2.0;", map[string]float64{"A": 5},
			"const A: u32 = 5u;\nconst B: f32 = 2.0;", false},

		{"unknown constant", "override A: u32 = 1;", map[string]float64{"B": 1}, "B", true},
		{"missing value", "override A: u32;", nil, "no default", true},
		{"u32 negative", "override A: u32 = 1;", map[string]float64{"A": -1}, "does not fit u32", true},
		{"u32 fraction", "override A: u32 = 1;", map[string]float64{"A": 1.5}, "does not fit u32", true},
		{"untyped expression", "override A = B * 2;", map[string]float64{"A": 1}, "declare it with a type", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webgpu.Specialize(tc.src, tc.constants)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error = %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestCacheKey(t *testing.T) {
	base := webgpu.Kernel{Name: "k", Source: "src", Bindings: []webgpu.Access{webgpu.ReadOnly},
		Constants: map[string]float64{"A": 1, "B": 2}}
	same := base
	same.Constants = map[string]float64{"B": 2, "A": 1}
	if base.CacheKey() != same.CacheKey() {
		t.Error("constant order changed the cache key")
	}
	for name, change := range map[string]func(k *webgpu.Kernel){
		"constant": func(k *webgpu.Kernel) { k.Constants = map[string]float64{"A": 1, "B": 3} },
		"source":   func(k *webgpu.Kernel) { k.Source = "other" },
		"bindings": func(k *webgpu.Kernel) { k.Bindings = []webgpu.Access{webgpu.ReadWrite} },
		"entry":    func(k *webgpu.Kernel) { k.Entry = "other" },
	} {
		k := base
		change(&k)
		if k.CacheKey() == base.CacheKey() {
			t.Errorf("changing the %s kept the cache key", name)
		}
	}
}

func TestInfoString(t *testing.T) {
	info := webgpu.Info{
		Adapter: "llvmpipe (LLVM 15.0.6, 256 bits)", Vendor: "Mesa (0x10005)", Backend: "Vulkan",
		DeviceType: "cpu", ShaderF16: true, MaxStorageBufferBindingSize: 128 << 20,
		MaxBufferSize: 2<<30 - 1, MaxComputeWorkgroupStorageSize: 32 << 10,
		MaxComputeInvocationsPerWorkgroup: 1024, MaxComputeWorkgroupsPerDimension: 65535,
		MinStorageBufferOffsetAlignment: 256, MaxStorageBuffersPerShaderStage: 10,
	}
	s := info.String()
	for _, want := range []string{"llvmpipe", "Vulkan", "cpu", "shader-f16:", "yes", "128 MiB", "2.0 GiB", "32 KiB", "1024", "256 B"} {
		if !strings.Contains(s, want) {
			t.Errorf("Info.String() lacks %q:\n%s", want, s)
		}
	}
}
