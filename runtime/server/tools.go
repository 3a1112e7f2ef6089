package server

import (
	"encoding/json"
	"regexp"
)

// Tool calling: tools and tool_choice are read by wire.Tools (the
// browser reads them the same way) into the definitions the template
// renders and the calls the reply is read for or held to
// (runtime.ChatTools); the Responses and Messages dialects turn their own
// tool shapes into OpenAI's first.

// toolName is what a function's name may be, in every dialect.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
