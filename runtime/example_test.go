package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/tessera-llm/tessera/runtime"
)

// The model every example uses: Karpathy's stories260K, greedy decoding, on
// the CPU so that the output is the same on every machine.
const exampleModel = "../../shared/models/stories260K.gguf"

// Generate a story: load a model, stream the tokens of one request.
func ExampleEngine_Generate() {
	eng, err := runtime.Load(exampleModel, runtime.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 12}
	fmt.Print(req.Prompt)
	_, err = eng.Generate(context.Background(), req, func(t runtime.Token) error {
		fmt.Print(t.Text)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	// Output:
	// Once upon a time, there was a little girl named Lily. She
}

// Range over a stream's tokens; several streams run at once on one engine,
// batched into the same forward passes.
func ExampleStream_Tokens() {
	eng, err := runtime.Load(exampleModel, runtime.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	a, _ := eng.Start(context.Background(), runtime.Request{Prompt: "The dog", MaxTokens: 8})
	b, _ := eng.Start(context.Background(), runtime.Request{Prompt: "The cat", MaxTokens: 8})
	for _, s := range []*runtime.Stream{a, b} {
		var text strings.Builder
		for tok, err := range s.Tokens() {
			if err != nil {
				log.Fatal(err)
			}
			text.WriteString(tok.Text)
		}
		fmt.Printf("%q\n", text.String())
	}
	// Output:
	// " was a big, red ball"
	// " and a boy were play"
}

// Sample with a seed: the same seed gives the same text; a context ends a
// generation early.
func ExampleSamplerOptions() {
	eng, err := runtime.Load(exampleModel, runtime.Options{Device: "cpu"})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	req := runtime.Request{Prompt: "Lily", MaxTokens: 10,
		Sampler: runtime.SamplerOptions{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 42}}
	texts := map[string]bool{}
	for range 2 {
		var text strings.Builder
		eng.Generate(context.Background(), req, func(t runtime.Token) error { text.WriteString(t.Text); return nil })
		texts[text.String()] = true
	}
	fmt.Println("distinct texts:", len(texts))
	// Output: distinct texts: 1
}

// Errors a caller branches on are typed.
func ExampleErrModelNotFound() {
	_, err := runtime.Load("no/such/model.gguf", runtime.Options{Device: "cpu"})
	fmt.Println(errors.Is(err, runtime.ErrModelNotFound))
	eng, _ := runtime.Load(exampleModel, runtime.Options{Device: "cpu", Context: 64})
	defer eng.Close()
	_, err = eng.Generate(context.Background(), runtime.Request{Prompt: strings.Repeat("a dog ran ", 40), MaxTokens: 5},
		func(runtime.Token) error { return nil })
	fmt.Println(errors.Is(err, runtime.ErrContextFull), eng.CountTokens("a dog ran "))
	// Output:
	// true
	// true 6
}
