package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// There is no Docker engine to build the image in the tests; these check
// what can be checked without one: the Dockerfile's stages, users and
// environment, and that .dockerignore keeps every file the build reads.

// stage is one FROM of a Dockerfile, with what it sets itself.
type stage struct {
	Name, Base string
	User       string            // the last USER, "" if none
	Env        map[string]string // ENV of this stage only
	Runs       []string          // RUN commands
	Copies     []string          // COPY instructions' arguments
}

// parseDockerfile splits a Dockerfile into its instructions (joining
// continued lines, dropping comments) and groups them by stage. It knows
// the instructions this Dockerfile uses; an ENV in the old "ENV K V" form
// is an error rather than a guess.
func parseDockerfile(text string) (stages map[string]*stage, order []string, args map[string]string, err error) {
	stages, args = map[string]*stage{}, map[string]string{}
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(t, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(t)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var st *stage
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			if st == nil {
				args[k] = v
			}
		case "FROM":
			f := strings.Fields(rest)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) != 3 || !strings.EqualFold(f[1], "AS") {
				return nil, nil, nil, fmt.Errorf("FROM %s: want IMAGE AS NAME", rest)
			}
			st = &stage{Name: f[2], Base: f[0], Env: map[string]string{}}
			stages[st.Name] = st
			order = append(order, st.Name)
		case "ENV":
			if st == nil {
				return nil, nil, nil, fmt.Errorf("ENV before FROM")
			}
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, nil, nil, fmt.Errorf("ENV %s: want KEY=VALUE", rest)
				}
				st.Env[k] = strings.Trim(v, `"`)
			}
		case "USER":
			st.User = rest
		case "RUN":
			st.Runs = append(st.Runs, rest)
		case "COPY":
			st.Copies = append(st.Copies, rest)
		}
	}
	return stages, order, args, nil
}

// effective returns a stage's user and environment with what it inherits
// from the stages it is built FROM.
func effective(stages map[string]*stage, name string) (user string, env map[string]string) {
	env = map[string]string{}
	var chain []*stage
	for s := stages[name]; s != nil; s = stages[s.Base] {
		chain = append([]*stage{s}, chain...)
		if len(chain) > len(stages) {
			break // a cycle; the checks below report the odd result
		}
	}
	for _, s := range chain {
		if s.User != "" {
			user = s.User
		}
		for k, v := range s.Env {
			env[k] = v
		}
	}
	return user, env
}

// uid is the numeric user of USER uid[:gid], or -1.
func uid(user string) int {
	u, _, _ := strings.Cut(user, ":")
	n, err := strconv.Atoi(u)
	if err != nil {
		return -1
	}
	return n
}

// checkDockerfile checks the Dockerfile's invariants; goVersion is go.mod's
// go directive.
func checkDockerfile(text, goVersion string) (map[string]*stage, []error) {
	var errs problems
	stages, order, args, err := parseDockerfile(text)
	if err != nil {
		return nil, []error{err}
	}
	mm := strings.Join(strings.SplitN(goVersion, ".", 3)[:2], ".")
	if args["GO_VERSION"] != mm {
		errs.add("ARG GO_VERSION=%s, but go.mod says go %s", args["GO_VERSION"], goVersion)
	}
	b := stages["build"]
	if b == nil {
		errs.add("no build stage")
		return stages, errs
	}
	rt := stages["runtime"]
	if rt == nil {
		errs.add("no runtime stage")
		return stages, errs
	}
	// The binary is linked against the build image's glibc: build on the
	// Debian release the runtime image runs.
	release, ok := strings.CutPrefix(rt.Base, "debian:")
	release, _, _ = strings.Cut(release, "-")
	if !ok || release == "" {
		errs.add("runtime stage FROM %s: want a debian image", rt.Base)
	} else if want := "golang:${GO_VERSION}-" + release; b.Base != want {
		errs.add("build stage FROM %s: want %s, the runtime's Debian release", b.Base, want)
	}
	if b.Env["CGO_ENABLED"] != "1" {
		errs.add("build stage: CGO_ENABLED=%q, want 1 (wgpu-native is linked with cgo)", b.Env["CGO_ENABLED"])
	}
	built := false
	for _, r := range b.Runs {
		built = built || (strings.Contains(r, "go build") && strings.Contains(r, "-o /out/tessera ./examples/tessera"))
	}
	if !built {
		errs.add("build stage: no RUN go build -o /out/tessera ./examples/tessera")
	}
	copied := false
	for _, c := range rt.Copies {
		copied = copied || strings.HasPrefix(c, "--from=build /out/tessera ")
	}
	if !copied {
		errs.add("runtime stage does not COPY --from=build /out/tessera")
	}
	for _, name := range []string{"cpu", "gpu"} {
		if stages[name] == nil {
			errs.add("no %s stage", name)
			continue
		}
		if u, _ := effective(stages, name); uid(u) <= 0 {
			errs.add("%s stage runs as USER %q: want a numeric non-root uid (runAsNonRoot can verify only a number)", name, u)
		}
	}
	if len(order) > 0 && order[len(order)-1] != "cpu" {
		errs.add("the last stage (the default target) is %s, want cpu", order[len(order)-1])
	}
	if stages["gpu"] != nil {
		_, env := effective(stages, "gpu")
		caps := strings.Split(env["NVIDIA_DRIVER_CAPABILITIES"], ",")
		for _, c := range []string{"compute", "graphics", "utility"} {
			if !contains(caps, c) {
				errs.add("gpu stage: NVIDIA_DRIVER_CAPABILITIES=%q lacks %s (Vulkan needs graphics)", env["NVIDIA_DRIVER_CAPABILITIES"], c)
			}
		}
		if env["NVIDIA_VISIBLE_DEVICES"] != "all" {
			errs.add("gpu stage: NVIDIA_VISIBLE_DEVICES=%q, want all", env["NVIDIA_VISIBLE_DEVICES"])
		}
		vulkan := false
		for _, r := range stages["gpu"].Runs {
			vulkan = vulkan || regexp.MustCompile(`apt-get install .*\blibvulkan1\b`).MatchString(r)
		}
		if !vulkan {
			errs.add("gpu stage does not install libvulkan1 (the Vulkan loader)")
		}
	}
	return stages, errs
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// goDirective reads the go line of the module's go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+(\.\d+)?)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func readDockerfile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDockerfile(t *testing.T) {
	if _, errs := checkDockerfile(readDockerfile(t), goDirective(t)); len(errs) > 0 {
		for _, err := range errs {
			t.Error(err)
		}
	}
}

// TestDockerfileChecker breaks the Dockerfile in the ways that matter and
// expects the checker to say so.
func TestDockerfileChecker(t *testing.T) {
	text := readDockerfile(t)
	for _, tc := range []struct{ name, old, new, want string }{
		{"trixie build for a bookworm runtime", "golang:${GO_VERSION}-bookworm", "golang:${GO_VERSION}-trixie", "runtime's Debian release"},
		{"no cgo", "CGO_ENABLED=1", "CGO_ENABLED=0", "CGO_ENABLED"},
		{"root", "USER 10001:10001\nEXPOSE", "USER root\nEXPOSE", "numeric non-root"},
		{"no Vulkan graphics", "NVIDIA_DRIVER_CAPABILITIES=compute,graphics,utility", "NVIDIA_DRIVER_CAPABILITIES=compute,utility", "lacks graphics"},
		{"no loader", "libvulkan1 ", "", "libvulkan1"},
		{"old Go", "ARG GO_VERSION=1.26", "ARG GO_VERSION=1.24", "go.mod says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(text, tc.old) {
				t.Fatalf("the Dockerfile no longer contains %q: update the test", tc.old)
			}
			_, errs := checkDockerfile(strings.Replace(text, tc.old, tc.new, 1), goDirective(t))
			expectError(t, errs, tc.want)
		})
	}
}

// dockerignore holds the patterns of a .dockerignore, in order.
type dockerignore []struct {
	re      *regexp.Regexp
	exclude bool
}

// parseDockerignore compiles .dockerignore patterns as Docker reads them:
// relative to the context root, * and ? within one path element, **
// across any number, a later !pattern re-including what an earlier one
// excluded.
func parseDockerignore(text string) (dockerignore, error) {
	var d dockerignore
	for _, l := range strings.Split(text, "\n") {
		p := strings.TrimSpace(l)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		exclude := true
		if s, ok := strings.CutPrefix(p, "!"); ok {
			p, exclude = s, false
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch c := p[i]; {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			case c == '[' || c == '\\':
				return nil, fmt.Errorf(".dockerignore %q: character classes and escapes are not supported by this test", l)
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re      *regexp.Regexp
			exclude bool
		}{regexp.MustCompile(re.String()), exclude})
	}
	return d, nil
}

// excluded reports whether path (slash-separated, relative to the context)
// is left out of the context: a pattern matching the path or any
// directory above it excludes it, and the last matching pattern wins.
func (d dockerignore) excluded(path string) bool {
	out := false
	for _, p := range d {
		for prefix := path; prefix != "."; prefix = filepath.ToSlash(filepath.Dir(prefix)) {
			if p.re.MatchString(prefix) {
				out = p.exclude
				break
			}
		}
	}
	return out
}

func TestDockerignoreMatcher(t *testing.T) {
	d, err := parseDockerignore("bin\ntessera\n**/*.gguf\ndocs\n!docs/keep.md\nweb/*.wasm\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"bin/tessera", true},
		{"tessera", true},
		{"examples/tessera/main.go", false}, // patterns are anchored at the root
		{"model.gguf", true},
		{"a/b/model.gguf", true},
		{"docs/SCALING.md", true},
		{"docs/keep.md", false},
		{"web/tessera.wasm", true},
		{"web/app.js", false},
		{"web/sub/x.wasm", false},
	} {
		if got := d.excluded(tc.path); got != tc.want {
			t.Errorf("excluded(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// TestDockerignoreKeepsBuildInputs lists every file `go build
// ./examples/tessera` reads from the module (sources, cgo files, embedded
// files) and go.mod/go.sum, and fails if .dockerignore leaves one out of
// the context.
func TestDockerignoreKeepsBuildInputs(t *testing.T) {
	data, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseDockerignore(string(data))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json", "./examples/tessera")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			Dir    string
			Module *struct{ Main bool }
			GoFiles, CgoFiles, CFiles, HFiles, SFiles, EmbedFiles,
			SysoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.HFiles, p.SFiles, p.EmbedFiles, p.SysoFiles} {
			for _, f := range list {
				files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	if len(files) < 20 {
		t.Fatalf("go list found only %d files: %v", len(files), files)
	}
	for _, f := range files {
		if d.excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the build reads", f)
		}
	}
	// And it does keep the context small.
	for _, f := range []string{".git", "bin/tessera", "testdata/x.gguf", "docs/SCALING.md", "examples/deploy/k8s/base/deployment.yaml"} {
		if !d.excluded(f) {
			t.Errorf(".dockerignore keeps %s in the context", f)
		}
	}
}
