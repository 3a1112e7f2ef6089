// Command testsum runs `go test -json` and prints what someone waiting for
// the suite wants to see, as it happens: each package's result when it
// finishes, each top-level test that took a while, the whole output of a
// test that fails, every so often the tests still running, and at the end
// the counts and the slowest tests. Plain `go test` is silent for as long
// as a package runs (runtime's tests take minutes), and `go test -v`
// buries a failure under thousands of lines; this is between the two.
//
//	go run ./.ci/testsum [flags] -- [go test flags] [packages]
//
// Its exit status is go test's. It lives under .ci, which `./...` does not
// match, so it is neither built nor vetted with the module's packages; it
// uses only the standard library.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, with
// the build events of Go 1.24).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// key names a top-level test of a package.
type key struct{ pkg, test string }

type summary struct {
	mu       sync.Mutex
	out      io.Writer
	slow     time.Duration // print a passing top-level test at least this slow
	all      bool          // print every top-level test
	module   string        // trimmed from package paths
	started  time.Time
	running  map[key]time.Time // top-level tests running, since they started or went on
	paused   map[key]bool      // parallel tests waiting for the sequential ones
	output   map[key][]string  // their output so far, subtests' included
	pkgOut   map[string][]string
	finished []result
	pkgs     map[string]string // package → pass, fail or skip

	failedPkgs []failedPkg // in the order they failed, repeated at the end
}

// failedPkg is a package that failed, with its own output (a panic's, a
// timeout's), for the summary at the end.
type failedPkg struct {
	pkg    string
	output []string
}

type result struct {
	key
	action  string
	elapsed float64
	output  []string // a failure's output, repeated at the end
}

func main() {
	slow := flag.Duration("slow", 5*time.Second, "print passing top-level tests that take at least this long")
	all := flag.Bool("all", false, "print every top-level test")
	every := flag.Duration("every", time.Minute, "how often to list the tests still running (0: never)")
	top := flag.Int("top", 10, "how many of the slowest tests to list at the end")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./.ci/testsum [flags] -- [go test flags] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	code, err := run(flag.Args(), *slow, *all, *every, *top)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}

func run(args []string, slow time.Duration, all bool, every time.Duration, top int) (int, error) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 2, err
	}
	s := &summary{
		out: os.Stdout, slow: slow, all: all, module: modulePath(goCmd), started: time.Now(),
		running: map[key]time.Time{}, paused: map[key]bool{}, output: map[key][]string{},
		pkgOut: map[string][]string{}, pkgs: map[string]string{},
	}
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	done := make(chan struct{})
	if every > 0 {
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					s.heartbeat()
				}
			}
		}()
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			s.print(string(line) + "\n") // not an event: pass it on
			continue
		}
		s.handle(e)
	}
	close(done)
	scanErr := sc.Err()
	waitErr := cmd.Wait()
	s.final(top)
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		return exit.ExitCode(), scanErr
	case waitErr != nil:
		return 2, waitErr
	case s.failed() > 0:
		return 1, scanErr
	}
	return 0, scanErr
}

// modulePath is the module's path, which package names are printed
// without; "" where go cannot say.
func modulePath(goCmd string) string {
	out, err := exec.Command(goCmd, "list", "-m").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func (s *summary) short(pkg string) string {
	if s.module != "" {
		if pkg == s.module {
			return "."
		}
		if p, ok := strings.CutPrefix(pkg, s.module+"/"); ok {
			return p
		}
	}
	return pkg
}

func (s *summary) print(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	io.WriteString(s.out, text)
}

func (s *summary) handle(e event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Action {
	case "build-output":
		io.WriteString(s.out, e.Output)
		return
	case "build-fail":
		fmt.Fprintf(s.out, "FAIL %s [build failed]\n", s.short(e.ImportPath))
		return
	}
	if e.Test == "" {
		s.handlePackage(e)
		return
	}
	k := key{e.Package, e.Test}
	if i := strings.IndexByte(e.Test, '/'); i >= 0 {
		k.test = e.Test[:i] // a subtest: its output is its parent's
		if e.Action == "output" {
			s.output[k] = append(s.output[k], e.Output)
		}
		return
	}
	switch e.Action {
	case "run", "cont":
		s.running[k] = time.Now()
		delete(s.paused, k)
	case "pause":
		delete(s.running, k)
		s.paused[k] = true
	case "output":
		s.output[k] = append(s.output[k], e.Output)
	case "pass", "fail", "skip":
		delete(s.running, k)
		delete(s.paused, k)
		r := result{key: k, action: e.Action, elapsed: e.Elapsed}
		if e.Action == "fail" {
			r.output = s.output[k]
		}
		s.finished = append(s.finished, r)
		d := time.Duration(e.Elapsed * float64(time.Second))
		switch {
		case e.Action == "fail":
			fmt.Fprintf(s.out, "--- FAIL %s %s (%.1fs)\n", s.short(e.Package), e.Test, e.Elapsed)
			for _, l := range s.output[k] {
				io.WriteString(s.out, "    "+l)
			}
		case s.all || (e.Action == "pass" && d >= s.slow):
			fmt.Fprintf(s.out, "    %s %s %s (%.1fs)\n", strings.ToUpper(e.Action), s.short(e.Package), e.Test, e.Elapsed)
		}
		delete(s.output, k)
	}
}

func (s *summary) handlePackage(e event) {
	switch e.Action {
	case "output":
		s.pkgOut[e.Package] = append(s.pkgOut[e.Package], e.Output)
	case "pass":
		s.pkgs[e.Package] = "pass"
		fmt.Fprintf(s.out, "ok   %s %.1fs\n", s.short(e.Package), e.Elapsed)
		delete(s.pkgOut, e.Package)
	case "skip":
		s.pkgs[e.Package] = "skip" // no test files
		delete(s.pkgOut, e.Package)
	case "fail":
		s.pkgs[e.Package] = "fail"
		// A panic, a timeout or a TestMain's failure is the package's
		// output: show it, and the output of tests it cut short.
		for _, l := range s.pkgOut[e.Package] {
			io.WriteString(s.out, "    "+l)
		}
		for k := range s.output {
			if k.pkg != e.Package {
				continue
			}
			fmt.Fprintf(s.out, "--- (unfinished) %s %s\n", s.short(k.pkg), k.test)
			for _, l := range s.output[k] {
				io.WriteString(s.out, "    "+l)
			}
			delete(s.running, k)
			delete(s.paused, k)
			delete(s.output, k)
		}
		for k := range s.running { // started, said nothing, never ended
			if k.pkg == e.Package {
				fmt.Fprintf(s.out, "--- (unfinished) %s %s\n", s.short(k.pkg), k.test)
				delete(s.running, k)
				delete(s.paused, k)
			}
		}
		s.failedPkgs = append(s.failedPkgs, failedPkg{e.Package, s.pkgOut[e.Package]})
		fmt.Fprintf(s.out, "FAIL %s %.1fs\n", s.short(e.Package), e.Elapsed)
		delete(s.pkgOut, e.Package)
	}
}

// heartbeat lists the top-level tests running, longest first, each with
// the time since it started or, if it is a parallel test, since it went
// on after the sequential tests, so that a long package shows it is moving.
func (s *summary) heartbeat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	type run struct {
		key
		since time.Time
	}
	var rs []run
	for k, t := range s.running {
		rs = append(rs, run{k, t})
	}
	if len(rs) == 0 {
		return
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].since.Before(rs[j].since) })
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", s.short(r.pkg), r.test, time.Since(r.since).Round(time.Second)))
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("and %d more", len(parts)-6))
	}
	fmt.Fprintf(s.out, "... %s: running %s\n", time.Since(s.started).Round(time.Second), strings.Join(parts, ", "))
}

func (s *summary) failed() int {
	n := 0
	for _, r := range s.finished {
		if r.action == "fail" {
			n++
		}
	}
	for _, v := range s.pkgs {
		if v == "fail" {
			n++
		}
	}
	return n
}

// failureTail is how many lines of each failure the summary repeats.
const failureTail = 40

// failures repeats, after everything else, which tests and packages
// failed and the end of what they printed: CI's log may keep only its
// last part, and a failure printed minutes earlier would be lost there.
func (s *summary) failures() {
	tail := func(lines []string) {
		if len(lines) > failureTail {
			fmt.Fprintf(s.out, "    ... (%d lines above)\n", len(lines)-failureTail)
			lines = lines[len(lines)-failureTail:]
		}
		for _, l := range lines {
			io.WriteString(s.out, "    "+l)
		}
	}
	heading := sync.OnceFunc(func() { fmt.Fprintln(s.out, "\nfailures, again:") })
	for _, r := range s.finished {
		if r.action == "fail" {
			heading()
			fmt.Fprintf(s.out, "--- FAIL %s %s (%.1fs)\n", s.short(r.pkg), r.test, r.elapsed)
			tail(r.output)
		}
	}
	for _, p := range s.failedPkgs {
		heading()
		fmt.Fprintf(s.out, "FAIL %s\n", s.short(p.pkg))
		tail(p.output)
	}
}

func (s *summary) final(top int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := map[string]int{}
	for _, r := range s.finished {
		count[r.action]++
	}
	pk := map[string]int{}
	for _, v := range s.pkgs {
		pk[v]++
	}
	s.failures()
	fmt.Fprintf(s.out, "\ntests: %d passed, %d failed, %d skipped (top-level) in %d packages (%d failed), %s\n",
		count["pass"], count["fail"], count["skip"], pk["pass"]+pk["fail"], pk["fail"], time.Since(s.started).Round(time.Second))
	if top <= 0 || len(s.finished) == 0 {
		return
	}
	sort.Slice(s.finished, func(i, j int) bool { return s.finished[i].elapsed > s.finished[j].elapsed })
	if len(s.finished) > top {
		s.finished = s.finished[:top]
	}
	fmt.Fprintln(s.out, "slowest:")
	for _, r := range s.finished {
		fmt.Fprintf(s.out, "  %6.1fs %s %s\n", r.elapsed, s.short(r.pkg), r.test)
	}
}
