package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// hostileBudget is how long a hostile request may take to get its 4xx
// (or its deadline's answer): the server's own limits end each in a
// second or two; ten seconds is for a loaded machine.
const hostileBudget = 10 * time.Second

// TestServeAdversarial starts a real `tessera serve` and sends it what a
// hostile client would: grammars whose parses multiply (nested and
// empty-able repetitions at the limits, chained through rules, deeply
// nested), JSON Schemas too deep or too large, a body at the size limit
// of one repeated character as a prompt, a chat message and a /tokenize
// text, a body past the limit, and a body that trickles. Each must get a
// 4xx (or the 408 of its deadline) within hostileBudget, the process must
// live with a peak RSS under 1 GiB, and a normal request must be served
// right after each. Before issue 39's fixes, the first grammar ended the
// process (a stack overflow), the empty-able ones grew it to gigabytes,
// and the megabyte prompt pinned a core for about half an hour.
func TestServeAdversarial(t *testing.T) {
	model := filepath.Join(shared, "stories260K.gguf")
	p := startProcess(t, "serve", "--addr", "127.0.0.1:0", "--device", "cpu", "--model", "story="+model,
		"--body-timeout", "2s", "--request-timeout", "20s")
	url := p.waitURL(t)
	waitHealthy(t, url, p.log)

	const limit = 8 << 20                        // the server's default body limit
	fill := func(prefix, suffix string) string { // a body of exactly limit bytes
		return prefix + strings.Repeat("a", limit-len(prefix)-len(suffix)) + suffix
	}
	deepSchema := strings.Repeat(`{"type":"array","items":`, 5000) + `{}` + strings.Repeat(`}`, 5000)
	var wide strings.Builder
	wide.WriteString(`{"type":"object","properties":{`)
	for i := range 300 {
		if i > 0 {
			wide.WriteString(",")
		}
		fmt.Fprintf(&wide, `"p%d":{"type":"string","maxLength":1000}`, i)
	}
	wide.WriteString(`}}`)
	var chained strings.Builder
	chained.WriteString("root ::= r0\n")
	for i := range 5 {
		fmt.Fprintf(&chained, "r%d ::= r%d{0,1000}\n", i, i+1)
	}
	chained.WriteString("r5 ::= \"a\"{0,1000}\n")
	gbnf := func(g string, maxTokens int) string { // ignore_eos: the model may not end early
		b, _ := json.Marshal(map[string]any{"model": "story", "prompt": "Once", "max_tokens": maxTokens, "grammar": g, "ignore_eos": true})
		return string(b)
	}
	regex := func(re string) string {
		b, _ := json.Marshal(map[string]any{"model": "story", "prompt": "Once", "max_tokens": 4, "regex": re})
		return string(b)
	}
	schema := func(s string) string {
		return `{"model":"story","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + s + `}}}`
	}
	deep := strings.Repeat("(", 200_000) + "a" + strings.Repeat(")", 200_000)

	for _, c := range []struct {
		name, path, body string
		want             []int // acceptable statuses
	}{
		{"regex nested bounded", "/v1/completions", regex(`((a{0,1000}){0,1000}){0,1000}`), []int{400}},
		{"regex empty-able nested", "/v1/completions", regex(`((a?){1000}){1000}`), []int{400}},
		{"gbnf nested bounded", "/v1/completions", gbnf(`root ::= (("a"{0,1000}){0,1000}){0,1000}`, 4), []int{400}},
		{"gbnf two levels, 200 tokens", "/v1/completions", gbnf(`root ::= ("a"{0,1000}){0,1000}`, 200), []int{400}},
		{"gbnf chained through rules", "/v1/completions", gbnf(chained.String(), 4), []int{400}},
		{"regex deeply nested groups", "/v1/completions", regex(deep), []int{400}},
		{"schema nested 5000 deep", "/v1/chat/completions", schema(deepSchema), []int{400}},
		{"schema of 300 long strings", "/v1/chat/completions", schema(wide.String()), []int{400}},
		{"prompt at the body limit", "/v1/completions", fill(`{"model":"story","max_tokens":1,"prompt":"`, `"}`), []int{400}},
		{"chat message at the body limit", "/v1/chat/completions", fill(`{"model":"story","max_tokens":1,"messages":[{"role":"user","content":"`, `"}]}`), []int{400}},
		{"tokenize at the body limit", "/tokenize", fill(`{"model":"story","prompt":"`, `"}`), []int{200, 400}},
		{"grammar at the body limit", "/v1/completions", fill(`{"model":"story","max_tokens":1,"prompt":"Once","regex":"`, `"}`), []int{400}},
		{"body past the limit", "/v1/completions", fill(`{"model":"story","max_tokens":1,"prompt":"`, `"}`) + " ", []int{413}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hostileBudget)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no answer within %v: %v\n%s", hostileBudget, err, p.log)
			}
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if !containsInt(c.want, resp.StatusCode) {
				t.Errorf("status %d after %v, want %v: %s", resp.StatusCode, time.Since(start).Round(time.Millisecond), c.want, msg)
			}
			t.Logf("%d in %v: %.200s", resp.StatusCode, time.Since(start).Round(time.Millisecond), msg)
			checkServing(t, url, p)
		})
	}

	t.Run("grammar that runs out mid-stream", func(t *testing.T) {
		// The start's probe cannot see past the text: the machine runs out
		// a few tokens in, after the stream's headers went out.
		ctx, cancel := context.WithTimeout(context.Background(), hostileBudget)
		defer cancel()
		body := `{"model":"story","prompt":"Hi","max_tokens":60,"stream":true,"regex":"Once upon a time, there was((a?){1000}){1000}"}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer within %v: %v", hostileBudget, err)
		}
		events, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(events), `"error"`) || !strings.Contains(string(events), "grammar budget exceeded") {
			t.Errorf("status %d, %v: the stream does not end with the budget's error event:\n%s", resp.StatusCode, err, events)
		}
		checkServing(t, url, p)
	})

	t.Run("slow body", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := `{"model":"story","prompt":"Once upon a time","max_tokens":4}`
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		done := make(chan struct{})
		go func() { // a byte a second, until the server answers
			defer close(done)
			for i := 0; i < len(body); i++ {
				if _, err := conn.Write([]byte{body[i]}); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
		conn.SetReadDeadline(time.Now().Add(hostileBudget))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a body at a byte a second within %v: %v", hostileBudget, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a body at a byte a second: %d, want 408", resp.StatusCode)
		}
		conn.Close()
		<-done
		checkServing(t, url, p)
	})

	if peak := peakRSS(t, p.cmd.Process.Pid); peak > 1<<30 {
		t.Errorf("the server's peak RSS was %d MiB", peak>>20)
	} else {
		t.Logf("the server's peak RSS: %d MiB", peak>>20)
	}
}

// TestServeHostileHubAndCache: the model cache and the Hub are inputs too.
// A pull from a Hub that accepts and never answers ends with its timeout
// well within hostileBudget, and `serve` of a reference whose index entry
// was tampered with to point outside the cache refuses to start, loading
// nothing and touching nothing outside.
func TestServeHostileHubAndCache(t *testing.T) {
	keep, err := os.ReadFile(filepath.Join(shared, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("blackhole hub", func(t *testing.T) {
		addr := hubtest.Blackhole(t)
		t.Setenv("HF_ENDPOINT", "http://"+addr)
		t.Setenv("TESSERA_CACHE", t.TempDir())
		start := time.Now()
		code, _, stderr := runCLI("pull", "--header-timeout", "1s", "--retries", "0", "acme/m/m.gguf")
		if took := time.Since(start); code == 0 || took > hostileBudget {
			t.Fatalf("pull from a blackhole: exit %d after %v: %s", code, took, stderr)
		}
		if !strings.Contains(stderr, "sent no response headers within 1s") {
			t.Errorf("the error does not say what timed out: %s", stderr)
		}
	})
	t.Run("tampered index", func(t *testing.T) {
		tc := hubtest.TamperedCache(t, keep)
		t.Setenv("TESSERA_CACHE", tc.Dir)
		for ref, how := range tc.Refs {
			start := time.Now()
			p := startProcess(t, "serve", "--addr", "127.0.0.1:0", "--device", "cpu", "--offline", "--model", ref)
			ctx, cancel := context.WithTimeout(context.Background(), hostileBudget)
			err := waitExit(ctx, p)
			cancel()
			if err == nil {
				t.Errorf("%s (%s): serve started or exited 0 after %v:\n%s", ref, how, time.Since(start), p.log)
			} else if !strings.Contains(p.log.String(), "damaged cache entry") {
				t.Errorf("%s (%s): %v, the log does not name the damage:\n%s", ref, how, err, p.log)
			}
		}
		tc.Intact(t, keep)
	})
}

// waitExit waits for p to exit, returning its error (nil: exit 0), or
// kills it and says so when ctx ends first.
func waitExit(ctx context.Context, p *process) error {
	done := make(chan error, 1)
	go func() {
		<-p.logged // the whole log first: Wait closes the pipe it comes through
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		p.cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running after %v", hostileBudget)
	}
}

// checkServing asserts the server lives and answers a normal request.
func checkServing(t *testing.T, url string, p *process) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		t.Fatalf("the server exited: %v\n%s", p.cmd.ProcessState, p.log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostileBudget)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions",
		bytes.NewReader([]byte(`{"model":"story","prompt":"Once upon a time","max_tokens":8,"temperature":0}`)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a normal request after it: %v\n%s", err, p.log)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct{ Text string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 || out.Choices[0].Text == "" {
		t.Fatalf("a normal request after it: %d %v %+v", resp.StatusCode, err, out)
	}
}

// peakRSS is the process's peak resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
