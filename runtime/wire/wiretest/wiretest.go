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

// BadChat are the conversation fields of a chat request (the server's
// POST /v1/chat/completions, the browser's {messages} input) that both
// homes refuse; Fields are the request's fields beside the model, its
// messages included. The plugin ABI's chat is messages of text alone,
// whose roles PluginMessages checks as these (Plugin).
var BadChat = []Bad{
	{"a role of none", `"messages": [{"role": "robot", "content": "Hi"}]`, `"messages": [{"role": "robot", "content": "Hi"}]`, "messages", `message 0 has role "robot"; roles are system, developer, user, assistant and tool`},
	{"no messages", `"messages": []`, ``, "messages", "messages must hold at least one message"},
	{"messages not an array", `"messages": "Hi"`, ``, "messages", "messages must be an array, not a JSON string"},
	{"a content part of no type", `"messages": [{"role": "user", "content": [{"type": "audio"}]}]`, ``, "messages", `content part of type "audio": parts are of the types text and image_url`},
	{"arguments not an object", `"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "Paris"}}]}]`, ``, "messages", `tool call "c": arguments must be a JSON object`},
	{"tools not an array", `"messages": [{"role": "user", "content": "Hi"}], "tools": "get_weather"`, ``, "tools", "tools must be an array, not a JSON string"},
	{"a tool of a bad name", `"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "bad name"}}]`, ``, "tools", `tool 0 must be {"type": "function", "function": {"name": ...}} with a name of letters, digits, _ and -`},
	{"a tool_choice of none", `"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "sometimes"`, ``, "tool_choice", `tool_choice "sometimes" is not one of "none", "auto" and "required"`},
	{"required without tools", `"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required"`, ``, "tool_choice", `tool_choice "required" needs tools`},
	{"a named tool not given", `"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}`, ``, "tool_choice", `tool_choice names "g", which is not among the tools`},
	{"a reasoning_effort of none", `"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "extreme"`, ``, "reasoning_effort", `reasoning_effort "extreme" is not one of minimal, low, medium and high`},
	{"a template variable of the engine's", `"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"messages": []}`, ``, "chat_template_kwargs", `chat_template_kwargs may not set "messages", which the engine sets`},
}
