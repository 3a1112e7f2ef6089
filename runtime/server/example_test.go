package server_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// Mount the OpenAI-compatible API in a Go program's own HTTP server, next
// to its other routes.
func ExampleServer() {
	eng, err := runtime.Load("../../../shared/models/stories260K.gguf", runtime.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	api := server.New(server.Options{})
	if err := api.Add("stories", eng); err != nil {
		log.Fatal(err)
	}
	api.Ready()

	mux := http.NewServeMux()
	mux.Handle("/", api)
	ts := httptest.NewServer(mux)
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(
		`{"model": "stories", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(strings.Contains(string(body), `"text":", there was a little girl named Lily. She"`))
	// Output:
	// 200 OK
	// true
}
