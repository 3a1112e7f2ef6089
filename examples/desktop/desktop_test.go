//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"go/build"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// storiesModel is the project's real test model, never copied into the repo.
var storiesModel = filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// missing skips the test for something the machine lacks, or fails it in
// CI, where .ci/install-deps.sh should have installed it.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if inCI() {
		t.Fatalf(format+" (CI=true: this is a failure)", args...)
	}
	t.Skipf(format+" (with CI=true this fails)", args...)
}

// goTool is the go command that is running this test.
func goTool() string {
	if p := filepath.Join(build.Default.GOROOT, "bin", "go"); build.Default.GOROOT != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// startXvfb starts a virtual X server on a free display (Xvfb picks it and
// reports it through -displayfd) and returns the display's name.
func startXvfb(t *testing.T, xvfb string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(xvfb, "-displayfd", "3", "-screen", "0", "1280x1024x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case d := <-line:
		if d != "" {
			return ":" + d
		}
		<-done
		t.Fatalf("Xvfb did not start:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("Xvfb reported no display within 30 s")
	}
	return ""
}

// TestDesktopChat builds the app, runs it under Xvfb with stories260K,
// lets it send one message, and checks the reply it prints and the
// screenshot it saves of its window.
func TestDesktopChat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the desktop app")
	}
	model, err := filepath.Abs(storiesModel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(model); err != nil {
		missing(t, "no test model: %v", err)
	}
	xvfb, err := exec.LookPath("Xvfb")
	if err != nil {
		missing(t, "no Xvfb (apt-get install xvfb, or .ci/install-desktop.sh)")
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "tessera-desktop")
	begin := time.Now()
	if out, err := exec.Command(goTool(), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %s: %.1f MB", time.Since(begin).Round(time.Millisecond), float64(st.Size())/1e6)

	display := startXvfb(t, xvfb)
	home := filepath.Join(dir, "home") // Cogent Core keeps settings and window geometry here
	xdg := filepath.Join(dir, "xdg")
	for _, d := range []string{home, xdg} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	shot := filepath.Join(dir, "chat.png")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--model", model,
		"--prompt", "Once upon a time",
		"--autosend", "--exit-after-reply",
		"--screenshot", shot,
		"--seed", "42", "--max-tokens", "100")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"DISPLAY="+display,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_RUNTIME_DIR="+xdg,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin = time.Now()
	err = cmd.Run()
	t.Logf("the app ran for %s:\n%s", time.Since(begin).Round(time.Millisecond), stdout.String())
	if err != nil {
		t.Fatalf("the app failed: %v\nstderr:\n%s", err, stderr.String())
	}

	lines := map[string]string{} // the first line with each prefix, less the prefix
	for _, l := range strings.Split(stdout.String(), "\n") {
		for _, p := range []string{"window shown after ", "loaded ", "reply: ", "stats: ", "screenshot: "} {
			if rest, ok := strings.CutPrefix(l, p); ok {
				if _, seen := lines[p]; !seen {
					lines[p] = rest
				}
			}
		}
	}
	for _, p := range []string{"window shown after ", "loaded ", "reply: ", "stats: ", "screenshot: "} {
		if _, ok := lines[p]; !ok {
			t.Errorf("the app printed no %q line", p)
		}
	}
	reply, err := strconv.Unquote(lines["reply: "])
	if err != nil {
		t.Fatalf("reply line %q: %v", lines["reply: "], err)
	}
	letters := 0
	for _, r := range reply {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	if letters < 20 || !strings.Contains(reply, " ") {
		t.Errorf("reply %q does not look like text", reply)
	}

	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	t.Logf("screenshot %dx%d, %d bytes", b.Dx(), b.Dy(), fi.Size())
	if b.Dx() < 400 || b.Dy() < 300 || b.Dx() > 8000 || b.Dy() > 8000 {
		t.Errorf("screenshot is %dx%d, want a window's size", b.Dx(), b.Dy())
	}
	if fi.Size() < 10_000 {
		t.Errorf("screenshot is only %d bytes: an empty window?", fi.Size())
	}
	if n := colours(img, 64); n < 64 {
		t.Errorf("screenshot has only %d colours: nothing drawn?", n)
	}
	if p := os.Getenv("TESSERA_DESKTOP_SCREENSHOT"); p != "" { // keep it, to look at
		data, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(p, data, 0o644)
		}
		if err != nil {
			t.Errorf("keep screenshot: %v", err)
		}
	}
}

// colours counts the distinct colours in img, up to limit.
func colours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}
