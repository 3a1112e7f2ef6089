package wire

import (
	"encoding/json"
	"errors"
	"strings"
)

// Unmarshal reads a request's JSON into v, answering a mistake as a
// *ParamError that names the field, in the words every home uses
// (JSONError). Unknown fields are ignored, as OpenAI ignores them.
func Unmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return JSONError(err)
	}
	return nil
}

// JSONError words an error of encoding/json reading a request as a
// *ParamError: a field's own refusal (a ParamError from UnmarshalJSON) as
// it is, a field of the wrong type naming the field and the type it
// takes, anything else as a body that is not a valid request.
func JSONError(err error) error {
	var pe *ParamError
	var typeErr *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &typeErr):
		field := jsonField(typeErr.Field)
		return paramError(field, "%s must be %s, not a JSON %s", fieldName(field), typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntax):
		return paramError("", "the body is not valid JSON: %v", err)
	}
	return paramError("", "the body is not a valid request: %v", err)
}

// jsonField is the JSON path of a field as encoding/json names it, less
// the Go names of the structs the request types embed (Sampling, Fields,
// the server's own), which are no part of the API: "Sampling.n" is "n".
func jsonField(f string) string {
	parts := strings.Split(f, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "sampling" && p != "Sampling" && p != "Fields" && p != "Generation" && p != "Chat" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

func fieldName(f string) string {
	if f == "" {
		return "the body"
	}
	return f
}

// typeName is how a message names the Go type a JSON field takes.
func typeName(t string) string {
	switch {
	case strings.Contains(t, "int"):
		return "an integer"
	case strings.Contains(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return "an object"
}
