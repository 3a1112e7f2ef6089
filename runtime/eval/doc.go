// Package eval measures an engine from outside: its speed (Bench: prompt
// and decode rates, dispatches, bandwidth, concurrency, prefix sharing,
// speculation), its quality (Perplexity, and Compare's KL divergence
// against a reference engine, as llama.cpp's perplexity tool reports it)
// and, before a model is loaded, the memory loading it takes
// (EstimateMemory).
//
// It uses runtime's exported API only: what it needs of an engine beyond
// serving (step counts, switches for speculation and the prefix cache,
// the backend's facts) are small accessors on runtime.Engine, so that the
// engine package holds the engine and this one the measurements of it.
package eval
