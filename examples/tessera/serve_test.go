package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary as the tessera command, so that a
// server can be started as a process and sent signals.
func TestMain(m *testing.M) {
	if os.Getenv("TESSERA_TEST_CLI") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startServe runs `tessera serve args...` as a child process listening on
// a free port, and returns its base URL once it is ready.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string, *syncLog) {
	t.Helper()
	p := startProcess(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--device", "cpu"}, args...)...)
	url := p.waitURL(t)
	waitHealthy(t, url, p.log)
	return p.cmd, url, p.log
}

// process is a child running this binary as the tessera command.
type process struct {
	cmd  *exec.Cmd
	log  *syncLog
	urls chan string
	// logged closes when the child's stderr has been read to its end:
	// Wait closes the pipe, so a caller that wants the whole log waits
	// for this first.
	logged chan struct{}
}

// startProcess starts `tessera args...`, copying its stderr into a log
// and noting the URL it says it listens on.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TESSERA_TEST_CLI=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p := &process{cmd: cmd, log: &syncLog{}, urls: make(chan string, 1), logged: make(chan struct{})}
	go func() {
		defer close(p.logged)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`url=(http://\S+)`)
		for sc.Scan() {
			p.log.add(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case p.urls <- m[1]:
				default:
				}
			}
		}
	}()
	return p
}

func (p *process) waitURL(t *testing.T) string {
	t.Helper()
	select {
	case url := <-p.urls:
		return url
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start:\n%s", p.log)
	}
	return ""
}

// waitHealthy waits for url's /health to answer 200.
func waitHealthy(t *testing.T, url string, log fmt.Stringer) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became healthy:\n%s", url, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncLog is a child's stderr, safe to read while it is written.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeSIGTERM: on SIGTERM the server reports draining on /health,
// refuses new requests, lets the running one finish, and exits 0.
func TestServeSIGTERM(t *testing.T) {
	cmd, url, log := startServe(t, "--model", "story="+filepath.Join(shared, "stories260K.gguf"), "--drain-timeout", "60s")
	// A request long enough to be running when the signal comes: it is
	// streamed, and the signal goes once its first token has.
	type answer struct {
		code   int
		tokens int
		body   string
	}
	started := make(chan struct{})
	done := make(chan answer, 1)
	go func() {
		defer close(started)
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"story","prompt":"Once upon a time","max_tokens":1500,"ignore_eos":true,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`))
		if err != nil {
			done <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		a := answer{code: resp.StatusCode}
		sc := bufio.NewScanner(resp.Body)
		for first := true; sc.Scan(); {
			line := sc.Text()
			a.body = line
			if first && strings.HasPrefix(line, "data: ") {
				first = false
				started <- struct{}{}
			}
			var chunk struct {
				Usage *struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &chunk) == nil && chunk.Usage != nil {
				a.tokens = chunk.Usage.CompletionTokens
			}
		}
		done <- a
	}()
	<-started
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawDraining := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !sawDraining; time.Sleep(5 * time.Millisecond) {
		resp, err := http.Get(url + "/health")
		if err != nil {
			break // already gone: the request finished first
		}
		resp.Body.Close()
		sawDraining = resp.StatusCode == http.StatusServiceUnavailable
	}
	if sawDraining {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a"}`))
		if err == nil {
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("a new request while draining got %d", resp.StatusCode)
			}
			resp.Body.Close()
		}
	} else {
		t.Errorf("/health never reported draining")
	}
	if a := <-done; a.code != 200 || a.tokens != 1500 {
		t.Errorf("the running request ended with %d, %d tokens: %.200s", a.code, a.tokens, a.body)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v:\n%s", err, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit after the drain:\n%s", log)
	}
	if !strings.Contains(log.String(), "draining") || !strings.Contains(log.String(), "request_id=") {
		t.Errorf("log lacks the drain or the request lines:\n%s", log)
	}
}

// TestServeFlags: bad command lines fail with usage errors before
// anything listens.
func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve"},
		{"serve", "--model", "a=x.gguf", "--model", "a=y.gguf"},
		{"serve", "--model", "=x.gguf"},
		{"serve", "--model", "x.gguf", "--log", "loud"},
	} {
		if code, _, errOut := runCLI(args...); code != 2 {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
	code, _, errOut := runCLI("serve", "--addr", "127.0.0.1:0", "--log", "off", "--device", "cpu", "--model", "missing.gguf")
	if code != 1 || !strings.Contains(errOut, "missing") {
		t.Errorf("missing model: exit %d (%s)", code, errOut)
	}
	// Runtime adapters are read only from a directory the operator names:
	// the two flags go together, and the directory must be one.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--allow-runtime-lora"}, 2, "--allow-runtime-lora needs --lora-dir DIR"},
		{[]string{"--lora-dir", t.TempDir()}, 2, "--lora-dir is for --allow-runtime-lora"},
		{[]string{"--allow-runtime-lora", "--lora-dir", filepath.Join(t.TempDir(), "none")}, 1, "--lora-dir"},
		{[]string{"--allow-runtime-lora", "--lora-dir", file}, 1, "is not a directory"},
		{[]string{"--allow-runtime-lora", "--lora-dir", t.TempDir(), "--lora-max-bytes", "0"}, 2, "--lora-max-bytes 0 must be positive"},
		{[]string{"--request-timeout", "0"}, 2, "--request-timeout 0: give a duration, or a negative one for no limit"},
		{[]string{"--body-timeout", "0s"}, 2, "--body-timeout 0: give a duration"},
		{[]string{"--drain-timeout", "-1s"}, 2, "--drain-timeout -1s must be >= 0"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--log", "off", "--device", "cpu", "--model", "x.gguf"}, tc.args...)
		if code, _, errOut := runCLI(args...); code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("%v: exit %d (%s), want %d saying %q", tc.args, code, errOut, tc.code, tc.says)
		}
	}
}

// TestServeDrainCutsStream: a stream still running when the SIGTERM
// drain's timeout ends is not cut silently: it ends with an error event
// (the shape a request timeout's has) and no [DONE], the connection
// closes, and serve exits 0 saying how many requests it cut.
func TestServeDrainCutsStream(t *testing.T) {
	cmd, url, log := startServe(t, "--model", "story="+filepath.Join(shared, "stories260K.gguf"), "--drain-timeout", "10ms")
	// 2000 tokens take seconds here; the signal goes after the first.
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"story","prompt":"Once upon a time","max_tokens":2000,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 4096)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
	}()
	select {
	case <-events:
	case <-time.After(30 * time.Second):
		t.Fatalf("no first event:\n%s", log)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var last string
	sawDone := false
	for ended := false; !ended; {
		select {
		case ev, ok := <-events:
			if !ok {
				ended = true
				break
			}
			last, sawDone = ev, sawDone || ev == "[DONE]"
		case <-time.After(30 * time.Second):
			t.Fatalf("the stream did not end 30 s after SIGTERM:\n%s", log)
		}
	}
	var e struct {
		Error struct{ Message, Type string }
	}
	if json.Unmarshal([]byte(last), &e) != nil || e.Error.Type != "unavailable" || !strings.Contains(e.Error.Message, "drain timeout ended") {
		t.Errorf("the cut stream's last event: %s", last)
	}
	if sawDone {
		t.Error("the cut stream sent [DONE]")
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v:\n%s", err, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit after the drain:\n%s", log)
	}
	if !strings.Contains(log.String(), "cut 1 requests") {
		t.Errorf("the log does not say the drain cut the request:\n%s", log)
	}
}

// TestServeSecondSignalQuits: a SIGTERM starts the drain, which would wait
// a minute for a running stream; a second one ends the process at once
// (the signal's default action), as a second Ctrl-C ends a model's load.
func TestServeSecondSignalQuits(t *testing.T) {
	cmd, url, log := startServe(t, "--model", "story="+filepath.Join(shared, "stories260K.gguf"), "--drain-timeout", "1m")
	resp, err := http.Post(url+"/v1/completions", "application/json",
		// 32 choices of 2000 tokens: tens of seconds here, still running
		// when the drain starts and when the second signal comes.
		strings.NewReader(`{"model":"story","prompt":"Once upon a time","max_tokens":2000,"n":32,"ignore_eos":true,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "draining"); {
		if time.Now().After(deadline) {
			t.Fatalf("no drain 30 s after SIGTERM:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-exited:
		t.Fatalf("serve exited during the drain (%v), with the stream running:\n%s", err, log)
	case <-time.After(200 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("serve ended with %v, not by the second SIGTERM:\n%s", cmd.ProcessState, log)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve still draining 20 s after a second SIGTERM:\n%s", log)
	}
}

// TestServeLimits: serve's connection limits, beside the handler's: a
// body slower than --body-timeout gets 408 and its connection closes;
// headers past 64 KiB get 431; both while the server serves on.
func TestServeLimits(t *testing.T) {
	_, url, log := startServe(t, "--model", "story="+filepath.Join(shared, "stories260K.gguf"), "--body-timeout", "500ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	slow, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body within 10 s: %v\n%s", err, log)
	}
	raw, _ := io.ReadAll(slow.Body)
	slow.Body.Close()
	if slow.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(raw), "the body did not arrive in time") {
		t.Errorf("a stalled body: %d %s", slow.StatusCode, raw)
	}
	if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
		t.Errorf("after the 408 the connection is open: %q %v", rest, err)
	}

	req, _ := http.NewRequest(http.MethodGet, url+"/health", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 100<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("a 100 KiB header: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a 100 KiB header: %d", resp.StatusCode)
		}
	}
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"story","prompt":"Once","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request after them: %d", resp.StatusCode)
	}
}

func (l *syncLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(b)
}

// TestServeRuntimeLoRA: `serve --allow-runtime-lora --lora-dir DIR` loads
// an adapter of DIR that `synth --lora --type f16` wrote through POST
// /v1/load_lora_adapter (refusing a FIFO and paths out of DIR at once),
// serves it as BASE:NAME, and unloads it; without the flag the endpoint
// answers 403, and --lora NAME=FILE serves the file as BASE:NAME. A
// --type synth cannot write is refused.
func TestServeRuntimeLoRA(t *testing.T) {
	base := filepath.Join(shared, "stories260K.gguf")
	adapter := filepath.Join(t.TempDir(), "tales.gguf")
	if code, _, errOut := runCLI("synth", "--lora", base, "--rank", "4", "--type", "q8_0", "--out", adapter); code != 2 || !strings.Contains(errOut, "f32, f16 or bf16") {
		t.Errorf("synth --lora --type q8_0: exit %d (%s), want a usage error", code, errOut)
	}
	if code, _, errOut := runCLI("synth", "--lora", base, "--rank", "4", "--type", "f16", "--out", adapter); code != 0 || !strings.Contains(errOut, "F16 matrices") {
		t.Fatalf("synth --lora: exit %d (%s)", code, errOut)
	}
	// Every answer within 10 s: a load of a FIFO used to wait for ever.
	bounded := &http.Client{Timeout: 10 * time.Second}
	post := func(url, body string) (int, string) {
		resp, err := bounded.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	load := `{"lora_name":"tales","lora_path":"tales.gguf"}`
	// --lora NAME=FILE names the adapter.
	_, off, _ := startServe(t, "--model", "story="+base, "--lora", "sql="+adapter)
	if code, body := post(off+"/v1/load_lora_adapter", load); code != http.StatusForbidden {
		t.Errorf("without --allow-runtime-lora: %d %s", code, body)
	}
	if code, body := post(off+"/v1/completions", `{"model":"story:sql","prompt":"Once","max_tokens":4}`); code != http.StatusOK {
		t.Errorf("the adapter named by --lora sql=FILE: %d %s", code, body)
	}
	fifo := filepath.Join(filepath.Dir(adapter), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	_, url, log := startServe(t, "--model", "story="+base, "--allow-runtime-lora", "--lora-dir", filepath.Dir(adapter))
	// Paths a client names are read only as regular files inside --lora-dir.
	for _, path := range []string{"fifo", "/etc/passwd", "../tales.gguf"} {
		if code, body := post(url+"/v1/load_lora_adapter", `{"lora_name":"x","lora_path":"`+path+`"}`); code != http.StatusBadRequest || strings.Contains(body, "root:") {
			t.Errorf("load %s: %d %s", path, code, body)
		}
	}
	if code, body := post(url+"/v1/load_lora_adapter", load); code != http.StatusOK {
		t.Fatalf("load: %d %s\n%s", code, body, log)
	}
	if code, body := post(url+"/v1/load_lora_adapter", `{"lora_name":"again","lora_path":"`+adapter+`"}`); code != http.StatusOK {
		t.Errorf("load by an absolute path inside --lora-dir: %d %s", code, body)
	}
	code, body := post(url+"/v1/completions", `{"model":"story:tales","prompt":"Once","max_tokens":4}`)
	if code != http.StatusOK {
		t.Errorf("completion with the adapter: %d %s", code, body)
	}
	if code, body := post(url+"/v1/unload_lora_adapter", `{"lora_name":"tales"}`); code != http.StatusOK {
		t.Errorf("unload: %d %s", code, body)
	}
	if code, _ := post(url+"/v1/completions", `{"model":"story:tales","prompt":"Once","max_tokens":4}`); code != http.StatusNotFound {
		t.Errorf("after the unload: %d", code)
	}
}

// TestServeBudgets: serve takes --max-batch-tokens and --max-seqs, logs
// the engine's budgets, and serves at one token and one sequence a step
// (a second request waits its turn in the queue) and at the largest.
func TestServeBudgets(t *testing.T) {
	model := "story=" + filepath.Join(shared, "stories260K.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-batch-tokens", "1", "--max-seqs", "1"}, "max_batch_tokens=1 max_seqs=1"},
		{[]string{"--max-batch-tokens", "8192", "--max-seqs", "256"}, "max_batch_tokens=2048 max_seqs=256"},
	} {
		_, url, log := startServe(t, append([]string{"--model", model}, c.args...)...)
		if !strings.Contains(log.String(), c.want) {
			t.Errorf("%v: the log does not say %q:\n%s", c.args, c.want, log)
		}
		var wg sync.WaitGroup
		texts := make([]string, 2)
		for i := range texts {
			wg.Go(func() {
				resp, err := http.Post(url+"/v1/completions", "application/json",
					strings.NewReader(`{"model":"story","prompt":"Once upon a time","max_tokens":16,"temperature":0}`))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var r struct {
					Choices []struct{ Text string } `json:"choices"`
				}
				if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Choices) != 1 {
					t.Errorf("%v: status %d", c.args, resp.StatusCode)
					return
				}
				texts[i] = r.Choices[0].Text
			})
		}
		wg.Wait()
		if texts[0] == "" || texts[0] != texts[1] {
			t.Errorf("%v: greedy texts %q", c.args, texts)
		}
	}
}
