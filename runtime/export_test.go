package runtime

// PromptEncodes is how many prompts e has rendered and tokenized from
// text (poolStats.prompts), for the tests that check a request's prompt
// is encoded once.
func (e *Engine) PromptEncodes() int64 { return e.prompts.Load() }
