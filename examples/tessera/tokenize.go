package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/tokenizer"
)

// takesArgs names the commands that read positional arguments; cli
// rejects them for the others.
var takesArgs = map[string]bool{"tokenize": true, "pull": true, "rm": true, "embed": true, "replay": true}

func setupTokenize(fs *flag.FlagSet) func(context.Context, *env) error {
	path := fs.String("tokenizer", "", "tokenizer: a GGUF, a tokenizer.json or its folder, a llama2.c tokenizer .bin or a SentencePiece .model (required)")
	special := fs.Bool("special", false, "special tokens on: match them in the text (<|im_start|>) and add the model's own (BOS); with --decode, write them out")
	decode := fs.Bool("decode", false, "read a JSON array of ids and print its text")
	return func(ctx context.Context, e *env) error {
		if strings.TrimSpace(*path) == "" {
			return usagef("--tokenizer is required")
		}
		if fs.NArg() != 1 {
			return usagef("want one argument, the text (or ids with --decode), or - to read standard input; got %d", fs.NArg())
		}
		input := fs.Arg(0)
		if input == "-" {
			b, err := io.ReadAll(e.stdin)
			if err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
			input = string(b)
		}
		var ids []int
		if *decode {
			if err := json.Unmarshal([]byte(input), &ids); err != nil {
				return usagef("--decode wants a JSON array of ids: %v", err)
			}
		}
		tok, err := models.LoadTokenizer(*path, 0)
		if err != nil {
			return err
		}
		if *decode {
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					return fmt.Errorf("id %d is outside the vocabulary of %d", id, tok.VocabSize())
				}
			}
			text := tok.Decode(ids)
			if *special {
				text = tokenizer.DecodeSpecial(tok, ids)
			}
			_, err := fmt.Fprintln(e.stdout, text)
			return err
		}
		if *special {
			ids = tokenizer.EncodeSpecial(tok, input, true)
		} else {
			ids = tok.Encode(input, false)
		}
		var b bytes.Buffer
		b.WriteByte('[')
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(id))
		}
		b.WriteString("]\n")
		_, err = e.stdout.Write(b.Bytes())
		return err
	}
}
