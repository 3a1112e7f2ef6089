// Package wiretest holds the requests every home must refuse alike: the
// table that the server's, the browser's and the plugin host's tests run
// through their own entry points (POST /v1/completions, tessera.generate's
// options.request, gen_open), each checking that its refusal names the
// same field with the same words, whatever envelope the home puts the
// words in (an HTTP 400's JSON, a TesseraError, ERR_ARGUMENT and
// last_error).
package wiretest

// Bad is a request that every home refuses.
type Bad struct {
	Name string
	// Fields are the request's fields as members of a JSON object
	// (`"temperature": 5`) in OpenAI's spelling, which the server's
	// bodies and the browser's options.request take. The request is a
	// completion's (a prompt continued), which the plugin ABI's is too.
	Fields string
	// Plugin are the same fields in the plugin ABI's spelling, "" where
	// the ABI has no such field (the home has nothing to refuse).
	Plugin string
	// Param is the field the refusal names; Msg is its message.
	Param, Msg string
}

// BadSampling are the generation fields every home refuses.
var BadSampling = []Bad{
	{"temperature above 2", `"temperature": 5`, `"temperature": 5`, "temperature", "temperature must be between 0 and 2, not 5"},
	{"negative temperature", `"temperature": -1`, `"temperature": -1`, "temperature", "temperature must be between 0 and 2, not -1"},
	{"temperature not a number", `"temperature": "hot"`, `"temperature": "hot"`, "temperature", "temperature must be a number, not a JSON string"},
	{"top_p above 1", `"top_p": 1.5`, `"top_p": 1.5`, "top_p", "top_p must be between 0 and 1, not 1.5"},
	{"negative top_p", `"top_p": -0.5`, `"top_p": -0.5`, "top_p", "top_p must be between 0 and 1, not -0.5"},
	{"top_p 0", `"top_p": 0`, ``, "top_p", "top_p must be above 0 (1 keeps every token)"}, // the ABI's 0 is off
	{"min_p above 1", `"min_p": 2`, `"min_p": 2`, "min_p", "min_p must be between 0 and 1, not 2"},
	{"top_k below -1", `"top_k": -2`, `"top_k": -2`, "top_k", "top_k must be -1 or 0 (off) or positive, not -2"},
	{"top_k not an integer", `"top_k": 1.5`, `"top_k": 1.5`, "top_k", "top_k must be an integer, not a JSON number 1.5"},
	{"negative max_tokens", `"max_tokens": -1`, `"max_tokens": -1`, "max_tokens", "max_tokens must be at least 0, not -1"},
	{"max_tokens not an integer", `"max_tokens": "many"`, `"max_tokens": "many"`, "max_tokens", "max_tokens must be an integer, not a JSON string"},
	{"seed not an integer", `"seed": "x"`, `"seed": "x"`, "seed", "seed must be an integer, not a JSON string"},
	{"repetition_penalty 0", `"repetition_penalty": 0`, ``, "repetition_penalty", "repetition_penalty must be above 0 (1 is off)"},
	{"frequency_penalty above 2", `"frequency_penalty": 3`, ``, "frequency_penalty", "frequency_penalty must be between -2 and 2, not 3"},
	{"n 0", `"n": 0`, ``, "n", "n must be between 1 and 32, not 0"},
	{"five stop strings", `"stop": ["a", "b", "c", "d", "e"]`, ``, "stop", "stop takes at most 4 strings, not 5"},
	{"stop not strings", `"stop": 5`, ``, "stop", "stop must be a string or an array of strings"},
	{"logprobs above 20", `"logprobs": 21`, ``, "logprobs", "logprobs must be between 0 and 20, not 21"},
	{"logit_bias of no token", `"logit_bias": {"x": 1}`, ``, "logit_bias", `logit_bias maps token ids to numbers in [-100, 100], not "x": 1`},
	{"response_format of no type", `"response_format": {"type": "xml"}`, ``, "response_format", `response_format type "xml" is not one of text, json_object and json_schema`},
	{"two constraints", `"regex": "a+", "grammar": "root ::= \"a\""`, ``, "regex", "grammar and regex cannot be combined: give one constraint"},
	{"empty guided_choice", `"guided_choice": []`, ``, "guided_choice", "guided_choice must hold at least one string"},
}

// Unknown is a field no dialect has, which every home ignores (as OpenAI
// does), so that a client built for a later version still works: a
// request with it, and good fields otherwise, is taken.
const Unknown = `"frobnicate": {"level": 11}`
