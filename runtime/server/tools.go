package server

// Tool calling: tools and tool_choice are read by wire.Tools (the
// browser reads them the same way) into the definitions the template
// renders and the calls the reply is read for or held to
// (runtime.ChatTools); the Responses and Messages dialects turn their own
// tool shapes into OpenAI's first (wire.ResponsesRequest.ChatTools,
// wire.AnthropicRequest.ChatTools), and the reply is read in
// reply.go.
