package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/server"
	"github.com/tessera-llm/tessera/runtime/wire/wiretest"
)

// TestBadSamplingAsEveryHome: the server refuses the requests of
// wiretest.BadSampling with a 400 naming the field, in the words the
// browser and the plugin host use for them too (their own tests run the
// same table).
func TestBadSamplingAsEveryHome(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	refusedAlike(t, url+"/v1/completions", `"prompt": "Once", `, wiretest.BadSampling)
	body := `{"model": "` + modelName + `", "prompt": "Once", "max_tokens": 1, ` + wiretest.Unknown + `}`
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request with an unknown field: %d", resp.StatusCode)
	}
}

// TestBadChatAsEveryHome: the chat requests of wiretest.BadChat are
// refused as the browser refuses them.
func TestBadChatAsEveryHome(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	refusedAlike(t, url+"/v1/chat/completions", ``, wiretest.BadChat)
}

// refusedAlike posts each case's fields (after more) to url and checks the
// 400 names its field with its words.
func refusedAlike(t *testing.T, url, more string, cases []wiretest.Bad) {
	t.Helper()
	for _, c := range cases {
		body := `{"model": "` + modelName + `", ` + more + c.Fields + `}`
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: answered %d (%v)", c.Name, resp.StatusCode, err)
			continue
		}
		if e.Error.Param == nil || *e.Error.Param != c.Param || e.Error.Message != c.Msg {
			t.Errorf("%s: refused as %v: %q, want %s: %q", c.Name, e.Error.Param, e.Error.Message, c.Param, c.Msg)
		}
	}
}
