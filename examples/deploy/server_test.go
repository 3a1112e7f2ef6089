package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// What the manifests are checked against, read from the server and the
// command they deploy rather than restated here.
type world struct {
	// Metrics is each metric name a serving replica's /metrics exports,
	// with its type (gauge, counter, histogram), from a real scrape, and
	// Labels the label names of its series.
	Metrics map[string]string
	Labels  map[string]map[string]bool
	// Handler is a real server.Server with a model loaded and ready, to
	// ask which paths it serves.
	Handler http.Handler
	// ServeFlags are the flags `tessera serve` defines (true: boolean),
	// read from examples/tessera's source.
	ServeFlags map[string]bool
	// Rules are prometheus-adapter's rules from k8s/prometheus-adapter.
	Rules []adapterRule
	// Stages are the Dockerfile's stages by name.
	Stages map[string]*stage
}

// serves reports whether GET path answers 200 on a ready server.
func (w *world) serves(path string) bool {
	rec := httptest.NewRecorder()
	w.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code == http.StatusOK
}

// The model the server tests use (runtime/server loads it from the same
// place); the engine gauges, the HPA's and the endpoint picker's signals,
// exist only for a loaded model.
const testModel = "../../../shared/models/stories260K.gguf"

var (
	serverOnce    sync.Once
	serverHandler http.Handler
	serverMetrics map[string]string
	serverLabels  map[string]map[string]bool
	serverErr     error
)

// realServer starts server.New with stories260K on the CPU, once per test
// binary, and scrapes its /metrics.
func realServer(t *testing.T) (http.Handler, map[string]string, map[string]map[string]bool) {
	t.Helper()
	serverOnce.Do(func() {
		eng, err := runtime.Load(testModel, runtime.Options{Device: "cpu"})
		if err != nil {
			serverErr = err
			return
		}
		srv := server.New(server.Options{})
		if err := srv.Add("stories260K", eng); err != nil {
			serverErr = err
			return
		}
		srv.Ready()
		// One request, so that the counters and histograms have series too.
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions",
			strings.NewReader(`{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 4}`)))
		if rec.Code != http.StatusOK {
			serverErr = errorf("POST /v1/completions: %d %s", rec.Code, rec.Body)
			return
		}
		rec = httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			serverErr = errorf("GET /metrics: %d", rec.Code)
			return
		}
		serverHandler = srv
		serverMetrics, serverLabels, serverErr = scrapeTypes(rec.Body.String())
	})
	if serverErr != nil {
		t.Fatalf("test server: %v", serverErr)
	}
	return serverHandler, serverMetrics, serverLabels
}

// scrapeTypes parses Prometheus's text format with its own parser (names
// may hold colons, as vLLM's do): each family's type, and the label names
// of its series.
func scrapeTypes(text string) (map[string]string, map[string]map[string]bool, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, nil, err
	}
	types, labels := map[string]string{}, map[string]map[string]bool{}
	for name, f := range fams {
		types[name] = strings.ToLower(f.GetType().String())
		labels[name] = map[string]bool{}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				labels[name][l.GetName()] = true
			}
		}
	}
	return types, labels, nil
}

// serveFlags reads the flags `tessera serve` defines from its source
// (setupServe and registerLoad in examples/tessera), so that the manifests
// cannot pass a flag serve would refuse.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range []string{"../tessera/serve.go", "../tessera/run.go"} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || (fd.Name.Name != "setupServe" && fd.Name.Name != "registerLoad") {
				continue
			}
			ast.Inspect(fd, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "fs" {
					return true
				}
				m := sel.Sel.Name
				arg := 0
				if strings.HasSuffix(m, "Var") {
					arg = 1 // fs.StringVar(&v, "name", ...), fs.Var(&v, "name", ...)
				}
				if len(call.Args) <= arg {
					return true
				}
				lit, ok := call.Args[arg].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				name, err := strconv.Unquote(lit.Value)
				if err == nil {
					flags[name] = strings.HasPrefix(m, "Bool")
				}
				return true
			})
		}
	}
	for _, want := range []string{"model", "addr", "drain-timeout", "request-timeout", "device"} {
		if _, ok := flags[want]; !ok {
			t.Fatalf("serve's flags, as read from its source, lack --%s: %v", want, flags)
		}
	}
	return flags
}
