package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
)

// TestSynthContext: --context sets the written model's context length
// (what a real vision tower's image tokens need of a tiny language
// model), and an impossible one is a usage error that names the flag.
func TestSynthContext(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		arg  string
		want int // context length written; 0: a usage error
	}{
		{"0", 256},
		{"1024", 1024},
		{"-1", 0},
		{"99999999999", 0},
	} {
		t.Run(c.arg, func(t *testing.T) {
			out := filepath.Join(dir, "m"+c.arg+".gguf")
			code, _, errOut := runCLI("synth", "--shape", "tiny-gemma3", "--context", c.arg, "--out", out)
			if c.want == 0 {
				if code != 2 || !strings.Contains(errOut, "--context") {
					t.Errorf("--context %s: exit %d, %q; want a usage error naming --context", c.arg, code, errOut)
				}
				return
			}
			if code != 0 {
				t.Fatalf("synth: %s", errOut)
			}
			m, err := models.Open(out, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Config.Context != c.want {
				t.Errorf("--context %s: the file says %d", c.arg, m.Config.Context)
			}
		})
	}
}
