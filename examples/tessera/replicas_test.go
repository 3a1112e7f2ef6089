package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tessera-llm/tessera/runtime"
)

// The multi-replica tests run three `tessera serve` processes on their own
// loopback ports behind haproxy, with the configuration that
// examples/deploy/haproxy ships, and drive them over HTTP as clients
// would. haproxy comes from .ci/install-haproxy.sh; without it the tests
// skip, except in CI.

// cluster is three replicas behind one haproxy.
type cluster struct {
	t        *testing.T
	url      string               // haproxy's frontend
	stats    string               // haproxy's stats page
	addrs    []string             // the replicas'
	args     []string             // serve's flags
	own      func(i int) []string // replica i's own flags, or nil
	replicas []*process
	proxy    *exec.Cmd
}

func newCluster(t *testing.T, balance string, args ...string) *cluster {
	t.Helper()
	return newClusterWith(t, balance, nil, args...)
}

// newClusterWith is newCluster with flags of each replica's own.
func newClusterWith(t *testing.T, balance string, own func(i int) []string, args ...string) *cluster {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("haproxy is missing (.ci/install-haproxy.sh installs it): %v", err)
		}
		t.Skipf("no haproxy: %v", err)
	}
	ports := freePorts(t, 5)
	c := &cluster{t: t, url: "http://" + ports[0], stats: "http://" + ports[1] + "/stats;csv", addrs: ports[2:], args: args, own: own}
	c.replicas = make([]*process, len(c.addrs))
	for i := range c.addrs {
		c.start(i)
	}
	for i := range c.addrs {
		waitHealthy(t, "http://"+c.addrs[i], c.replicas[i].log)
	}
	c.proxy = exec.Command(bin, "-db", "-f", filepath.Join("..", "deploy", "haproxy", "haproxy.cfg"))
	c.proxy.Env = append(os.Environ(), "TESSERA_LISTEN="+ports[0], "TESSERA_STATS="+ports[1], "TESSERA_BALANCE="+balance,
		"TESSERA_R1="+c.addrs[0], "TESSERA_R2="+c.addrs[1], "TESSERA_R3="+c.addrs[2])
	var proxyLog syncLog
	c.proxy.Stdout, c.proxy.Stderr = &proxyLog, &proxyLog
	if err := c.proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.proxy.Process.Kill(); c.proxy.Wait() })
	// Up once haproxy's health checks have seen every replica.
	for deadline := time.Now().Add(30 * time.Second); c.upServers() < len(c.addrs); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("haproxy never saw the replicas up:\n%s", &proxyLog)
		}
	}
	return c
}

// start (re)starts replica i on its port.
func (c *cluster) start(i int) {
	args := append([]string{"serve", "--addr", c.addrs[i], "--device", "cpu", "--log", "off",
		"--model", "story=" + filepath.Join(shared, "stories260K.gguf")}, c.args...)
	if c.own != nil {
		args = append(args, c.own(i)...)
	}
	c.replicas[i] = startProcess(c.t, args...)
}

// statsRows reads haproxy's CSV stats: one map per proxy/server row.
func (c *cluster) statsRows() []map[string]string {
	resp, err := http.Get(c.stats)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	r := csv.NewReader(resp.Body)
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil || len(recs) == 0 {
		return nil
	}
	head := recs[0]
	head[0] = strings.TrimPrefix(head[0], "# ")
	var rows []map[string]string
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, v := range rec {
			if i < len(head) {
				row[head[i]] = v
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func (c *cluster) upServers() int {
	n := 0
	for _, r := range c.statsRows() {
		if r["pxname"] == "tessera" && strings.HasPrefix(r["svname"], "r") && strings.HasPrefix(r["status"], "UP") {
			n++
		}
	}
	return n
}

// retries is what haproxy's backend counts as retried and redispatched.
func (c *cluster) retries() (retried, redispatched int) {
	for _, r := range c.statsRows() {
		if r["pxname"] == "tessera" && r["svname"] == "BACKEND" {
			retried, _ = strconv.Atoi(r["wretr"])
			redispatched, _ = strconv.Atoi(r["wredis"])
		}
	}
	return
}

// handedOut is every port freePorts has returned in this test binary: a
// port is free when asked for, and the kernel may give it again to the
// next call before the first caller's server binds it (the KV events'
// ports of TestReplicasPrefixAffinity came back as haproxy's stats port:
// "Address already in use").
var handedOut = struct {
	sync.Mutex
	ports map[string]bool
}{ports: map[string]bool{}}

// freePorts returns n loopback addresses whose ports were free and were
// not returned before in this test binary.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for len(out) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln) // held until the end, so that a port handed out before is not offered again
		if a := ln.Addr().String(); !handedOut.ports[a] {
			handedOut.ports[a] = true
			out = append(out, a)
		}
	}
	return out
}

// reqOutcome is one request of a load.
type reqOutcome struct {
	start, end time.Time
	ttft       time.Duration
	text       string
	err        error
}

// completion sends one greedy completion through url, streamed or not,
// and returns its text. A stream must end with [DONE]: one cut short is
// an error, never a success.
func completion(ctx context.Context, url, prompt string, maxTokens int, stream bool, header ...string) (o reqOutcome) {
	o.start = time.Now()
	defer func() { o.end = time.Now() }()
	body, _ := json.Marshal(map[string]any{"model": "story", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "stream": stream})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		o.err = fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		return o
	}
	type chunk struct {
		Choices []struct{ Text string }   `json:"choices"`
		Error   *struct{ Message string } `json:"error"`
	}
	if !stream {
		var c chunk
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Choices) == 0 {
			o.err = fmt.Errorf("bad answer: %v", err)
			return o
		}
		o.text, o.ttft = c.Choices[0].Text, time.Since(o.start)
		return o
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			o.text = text.String()
			return o
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			o.err = err
			return o
		}
		if c.Error != nil {
			o.err = errors.New(c.Error.Message)
			return o
		}
		if len(c.Choices) > 0 && c.Choices[0].Text != "" {
			if o.ttft == 0 {
				o.ttft = time.Since(o.start)
			}
			text.WriteString(c.Choices[0].Text)
		}
	}
	o.err = fmt.Errorf("the stream ended without [DONE]: %v", sc.Err())
	if sc.Err() == nil {
		o.err = errors.New("the stream ended without [DONE]")
	}
	return o
}

// load sends n requests at concurrency conc; job i's prompt and length
// come from jobs. During it, fault (if set) is called with the number of
// requests finished so far after each one.
func load(ctx context.Context, url string, n, conc int, job func(i int) (prompt string, maxTokens int, stream bool, header []string), fault func(done int)) []reqOutcome {
	out := make([]reqOutcome, n)
	next := make(chan int)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := range next {
				p, m, s, h := job(i)
				out[i] = completion(ctx, url, p, m, s, h...)
				d := done.Add(1)
				if fault != nil {
					fault(int(d))
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// latencies returns the p50 and p99 of the successful requests' latency.
func latencies(out []reqOutcome) (p50, p99 time.Duration) {
	var d []time.Duration
	for _, o := range out {
		if o.err == nil {
			d = append(d, o.end.Sub(o.start))
		}
	}
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[min(len(d)-1, len(d)*99/100)]
}

var replicaPrompts = []string{
	"Once upon a time, there was a dog",
	"Lily and Ben went to the park",
	"One day, a little bird",
	"Sara had a red ball",
	"The sun was hot. Tom wanted to swim",
	"There was a big tree in the garden",
}

// TestReplicasFaults: 300 requests at concurrency 24 through haproxy to
// three replicas, first undisturbed, then while one replica is SIGKILLed
// and restarted and another SIGTERMed. Every answer that succeeds is
// exactly the model's greedy text; the only failures are requests that
// were running on the killed replica, and they fail (a stream without
// [DONE], a 502), never hang; the drained replica exits 0 having finished
// its requests.
func TestReplicasFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and haproxy")
	}
	c := newCluster(t, "roundrobin", "--drain-timeout", "20s")
	eng, err := runtime.Load(filepath.Join(shared, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const n, conc = 300, 24
	lengths := []int{40, 80, 120}
	want := map[[2]int]string{}
	for p := range replicaPrompts {
		for _, m := range lengths {
			var text strings.Builder
			if _, err := eng.Generate(context.Background(), runtime.Request{Prompt: replicaPrompts[p], MaxTokens: m}, func(tk runtime.Token) error {
				text.WriteString(tk.Text)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want[[2]int{p, m}] = text.String()
		}
	}
	job := func(i int) (string, int, bool, []string) {
		return replicaPrompts[i%len(replicaPrompts)], lengths[i/len(replicaPrompts)%len(lengths)], i%2 == 0, nil
	}
	check := func(name string, out []reqOutcome) (ok, failed int) {
		for i, o := range out {
			p, m, _, _ := job(i)
			if o.err != nil {
				failed++
				continue
			}
			ok++
			if o.text != want[[2]int{i % len(replicaPrompts), m}] {
				t.Errorf("%s: request %d (%q, %d tokens) answered %q", name, i, p, m, o.text)
			}
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	clean := load(ctx, c.url, n, conc, job, nil)
	ok, failed := check("clean", clean)
	r0, d0 := c.retries()
	p50, p99 := latencies(clean)
	t.Logf("no faults: sent %d, succeeded %d, failed %d, retried %d+%d redispatched; latency p50 %v p99 %v", n, ok, failed, r0, d0, p50.Round(time.Millisecond), p99.Round(time.Millisecond))
	if failed > 0 {
		for _, o := range clean {
			if o.err != nil {
				t.Errorf("without faults: %v", o.err)
				break
			}
		}
	}

	// The faults: kill r1 when a fifth is done and restart it at once;
	// SIGTERM r2 at half way.
	var killAt, termAt time.Time
	var once1, once2 sync.Once
	restarted := make(chan struct{})
	fault := func(done int) {
		if done >= n/5 {
			once1.Do(func() {
				killAt = time.Now()
				c.replicas[0].cmd.Process.Signal(syscall.SIGKILL)
				c.replicas[0].cmd.Wait()
				go func() { c.start(0); close(restarted) }()
			})
		}
		if done >= n/2 {
			once2.Do(func() {
				termAt = time.Now()
				c.replicas[1].cmd.Process.Signal(syscall.SIGTERM)
			})
		}
	}
	faulty := load(ctx, c.url, n, conc, job, fault)
	ok, failed = check("faults", faulty)
	r1, d1 := c.retries()
	p50f, p99f := latencies(faulty)
	t.Logf("faults: sent %d, succeeded %d, failed %d, retried %d+%d redispatched; latency p50 %v p99 %v",
		n, ok, failed, r1-r0, d1-d0, p50f.Round(time.Millisecond), p99f.Round(time.Millisecond))
	var cut []string
	for i, o := range faulty {
		if o.err == nil {
			continue
		}
		if _, _, stream, _ := job(i); stream {
			cut = append(cut, o.err.Error())
		}
		// Only what ran on the killed replica may fail: started before the
		// kill, ended after it.
		if o.start.After(killAt) || o.end.Before(killAt) {
			t.Errorf("request %d failed outside the kill (from %v to %v after it): %v", i, o.start.Sub(killAt), o.end.Sub(killAt), o.err)
		}
	}
	if failed > conc {
		t.Errorf("%d requests failed, more than were running", failed)
	}
	t.Logf("of the %d failures, %d were streams cut by the kill (%q...), the rest unstreamed requests haproxy answered 502", failed, len(cut), cut)
	if killAt.IsZero() || termAt.IsZero() {
		t.Fatal("the faults never happened")
	}
	// The drained replica exits 0; the killed one is back.
	exited := make(chan error, 1)
	go func() { exited <- c.replicas[1].cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the SIGTERMed replica exited with %v:\n%s", err, c.replicas[1].log)
		}
	case <-time.After(30 * time.Second):
		t.Error("the SIGTERMed replica did not exit")
	}
	<-restarted
	waitHealthy(t, "http://"+c.addrs[0], c.replicas[0].log)
	if o := completion(ctx, c.url, replicaPrompts[0], 40, true); o.err != nil || o.text != want[[2]int{0, 40}] {
		t.Errorf("after the faults: %q, %v", o.text, o.err)
	}
}

// TestReplicasPrefixAffinity: 8 long system prompts, each shared by many
// users, through three replicas under three policies, each on fresh
// replicas: round robin (haproxy) spreads every prompt over every replica
// and their prefix caches thrash; hashing a header that names the prompt
// (haproxy's stand-in for an inference gateway's approximate prefix
// scorer, which needs the client's help) keeps each prompt on one
// replica; and a precise-prefix router fed by the replicas' KV events
// (preciseRouter, as llm-d routes on vLLM's events) does the same with no
// header, from what each replica's cache holds. It logs each policy's
// prefix-cache hit rate and mean time to first token.
func TestReplicasPrefixAffinity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and haproxy")
	}
	const systems, users, conc = 8, 12, 8
	var system []string
	for i := range systems {
		var b strings.Builder
		fmt.Fprintf(&b, "Story %d. ", i)
		for j := 0; b.Len() < 1100; j++ {
			fmt.Fprintf(&b, "%s had %d red balls and %d blue cars in the park. ", []string{"Tom", "Lily", "Ben", "Sue"}[(i+j)%4], i+j, 2*i+j)
		}
		system = append(system, b.String())
	}
	job := func(i int) (string, int, bool, []string) {
		s := i % systems
		return system[s] + fmt.Sprintf(" User %d asks:", i/systems), 8, true, []string{"X-Prefix-Key", strconv.Itoa(s)}
	}
	// The precise router tokenizes prompts as the replicas do.
	eng, err := runtime.Load(filepath.Join(shared, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	tokenize := func(p string) ([]int32, error) { return eng.PromptTokens(runtime.Request{Prompt: p}) }
	type result struct {
		hitRate float64
		ttft    time.Duration
	}
	results := map[string]result{}
	policies := []string{"roundrobin", "hdr(X-Prefix-Key)", "precise (KV events)"}
	for _, policy := range policies {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var c *cluster
		target := ""
		if strings.HasPrefix(policy, "precise") {
			var ports, events, replays, replicas []string
			for _, a := range freePorts(t, 6) {
				_, port, _ := net.SplitHostPort(a)
				ports = append(ports, port)
			}
			c = newClusterWith(t, "roundrobin", kvEventArgs(ports), "--context", "1024")
			for i, a := range c.addrs {
				replicas = append(replicas, "http://"+a)
				events = append(events, "tcp://127.0.0.1:"+ports[2*i])
				replays = append(replays, "tcp://127.0.0.1:"+ports[2*i+1])
			}
			router := httptest.NewServer(startPreciseRouter(t, ctx, replicas, events, replays, eng.KVBlockSize(), tokenize))
			defer router.Close()
			target = router.URL
		} else {
			c = newCluster(t, policy, "--context", "1024")
			target = c.url
		}
		out := load(ctx, target, systems*users, conc, job, nil)
		cancel()
		var hits, queries float64
		for _, a := range c.addrs {
			m := scrapeMetrics(t, "http://"+a)
			hits += m["vllm:prefix_cache_hits_total"]
			queries += m["vllm:prefix_cache_queries_total"]
		}
		var ttft time.Duration
		for _, o := range out {
			if o.err != nil {
				t.Fatalf("%s: %v", policy, o.err)
			}
			ttft += o.ttft
		}
		results[policy] = result{hits / queries, ttft / time.Duration(len(out))}
		t.Logf("%-20s prefix-cache hit rate %.1f%%, mean TTFT %v", policy, 100*hits/queries, (ttft / time.Duration(len(out))).Round(time.Millisecond))
		for _, p := range c.replicas {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
		c.proxy.Process.Kill()
		c.proxy.Wait()
	}
	rr, hash, precise := results[policies[0]], results[policies[1]], results[policies[2]]
	if hash.hitRate < rr.hitRate+0.2 {
		t.Errorf("header hash hit rate %.2f, round robin %.2f: want affinity well ahead", hash.hitRate, rr.hitRate)
	}
	if precise.hitRate < rr.hitRate+0.2 {
		t.Errorf("precise routing hit rate %.2f, round robin %.2f: want it well ahead", precise.hitRate, rr.hitRate)
	}
}

// scrapeMetrics reads a replica's /metrics into name → value, summing
// series of the same name.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			switch {
			case m.Counter != nil:
				out[name] += m.Counter.GetValue()
			case m.Gauge != nil:
				out[name] += m.Gauge.GetValue()
			}
		}
	}
	return out
}
