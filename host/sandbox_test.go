package host_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/host"
)

// TestSandbox: a plugin reaches no file, clock, randomness or network the
// embedder did not grant.
func TestSandbox(t *testing.T) {
	eng := load(t, "cpu")
	h := newHost(t, eng)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "title.txt"), []byte("The Brave Little Dog"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("outside the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(data, "link.txt")); err != nil {
		t.Fatal(err)
	}
	ro := []host.Mount{{Dir: data, Guest: "/data"}}
	rw := []host.Mount{{Dir: data, Guest: "/data", Writable: true}}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()

	tests := []struct {
		name  string
		pol   host.Policy
		input map[string]any
		ok    bool   // whether the plugin should succeed
		want  string // in its output (on success) or error (on failure)
	}{
		{"read without a mount", host.Policy{}, map[string]any{"mode": "read", "path": "/data/title.txt"}, false, "title.txt"},
		{"read the host's files", host.Policy{}, map[string]any{"mode": "read", "path": "/etc/passwd"}, false, "passwd"},
		{"read a granted file", host.Policy{Mounts: ro}, map[string]any{"mode": "read", "path": "/data/title.txt"}, true, "The Brave Little Dog"},
		{"read outside the mount", host.Policy{Mounts: ro}, map[string]any{"mode": "read", "path": "/data/../secret.txt"}, false, "secret.txt"},
		{"escape with a raw ..", host.Policy{Mounts: ro}, map[string]any{"mode": "escape", "path": "../secret.txt"}, false, "errno"},
		{"follow a symbolic link out", host.Policy{Mounts: ro}, map[string]any{"mode": "read", "path": "/data/link.txt"}, false, "link.txt"},
		{"open a granted file raw", host.Policy{Mounts: ro}, map[string]any{"mode": "escape", "path": "title.txt"}, true, "opened"},
		{"write a read-only mount", host.Policy{Mounts: ro}, map[string]any{"mode": "write", "path": "/data/new.txt"}, false, "new.txt"},
		{"write a writable mount", host.Policy{Mounts: rw}, map[string]any{"mode": "write", "path": "/data/new.txt"}, true, ""},
		{"network", host.Policy{}, map[string]any{"mode": "dial", "addr": ln.Addr().String()}, false, "dial"},
		{"network with every grant", host.Policy{Mounts: rw, Clock: true, Random: true}, map[string]any{"mode": "dial", "addr": ln.Addr().String()}, false, "dial"},
		{"fake clock", host.Policy{}, map[string]any{"mode": "clock"}, true, "2022-01-01"}, // wazero's fixed epoch
		{"escape a writable mount", host.Policy{Mounts: rw}, map[string]any{"mode": "escape", "path": "../secret.txt"}, false, "errno"},
		{"real clock", host.Policy{Clock: true}, map[string]any{"mode": "clock"}, true, time.Now().UTC().Format("2006-01-02")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadPlugin(t, h, "testplugin", tt.pol)
			res, err := p.Run(context.Background(), input(t, tt.input))
			switch {
			case tt.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tt.ok && err == nil:
				t.Fatalf("allowed, output %q", res.Output)
			case tt.ok && !strings.Contains(string(res.Output), tt.want):
				t.Errorf("output %q does not contain %q", res.Output, tt.want)
			case !tt.ok && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if err != nil {
				t.Logf("%v", err)
			}
		})
	}
	select {
	case <-accepted:
		t.Error("a plugin connected to the network")
	default:
	}
	if b, err := os.ReadFile(filepath.Join(data, "new.txt")); err != nil || string(b) != "written by a plugin" {
		t.Errorf("the writable mount did not get the file: %q, %v", b, err)
	}
}

// TestRandomness: without the grant a plugin's randomness is the same
// fixed stream every run; with it, it is crypto/rand.
func TestRandomness(t *testing.T) {
	h := newHost(t, load(t, "cpu"))
	for _, tt := range []struct {
		grant bool
		same  bool
	}{{false, true}, {true, false}} {
		p := loadPlugin(t, h, "testplugin", host.Policy{Random: tt.grant})
		var outs []string
		for range 2 {
			res, err := p.Run(context.Background(), input(t, mode("random")))
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, string(res.Output))
		}
		if (outs[0] == outs[1]) != tt.same {
			t.Errorf("Random %v: two runs drew %q and %q", tt.grant, outs[0], outs[1])
		}
	}
}
