package chat

import (
	"bytes"
	"encoding/json"
	"math"
)

// A call's arguments, as a template sees them. Templates disagree on
// what arguments are: most iterate them as a mapping or write them with
// tojson (Hugging Face's own convention), DeepSeek's concatenate them as
// the JSON string of OpenAI's API. argsObject is both: a mapping whose
// text is its JSON. Its numbers are what Python's json.loads would give
// a template, integers where they have no fraction (a Go float64 2 would
// otherwise render as 2.0).
type argsObject map[string]any

// String is the arguments' JSON, as a template that adds them to a
// string writes them.
func (a argsObject) String() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any(a))
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}

// templateArgs makes a call's arguments what a template expects.
func templateArgs(args map[string]any) argsObject {
	if args == nil {
		return argsObject{}
	}
	return argsObject(integral(args).(map[string]any))
}

// integral is v with every whole float64 (within int64) an int64.
func integral(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = integral(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = integral(e)
		}
		return out
	}
	return v
}
