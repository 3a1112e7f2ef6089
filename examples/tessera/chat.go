package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
)

// interrupts delivers Ctrl-C to chat, which stops the reply rather than
// the program; tests replace it.
var interrupts = func() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	return ch, func() { signal.Stop(ch) }
}

// errInterrupted ends a reply that Ctrl-C stopped.
var errInterrupted = errors.New("interrupted")

// errEndOfTurn ends a reply at one of the tokenizer's end tokens.
var errEndOfTurn = errors.New("end of turn")

const chatHelp = `commands: /reset forgets the conversation, /system TEXT sets the system message, /image PATH puts an image (PNG, JPEG or WebP; a model loaded with --mmproj) before the next message, /exit quits (so do Ctrl-D and Ctrl-C here); Ctrl-C during a reply stops it`

func setupChat(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	prompt := fs.String("prompt", "", "one message to answer, then exit (default: an interactive chat on standard input)")
	system := fs.String("system", "", "system message")
	template := fs.String("template", "", "chat template: a Jinja file, or a tokenizer_config.json or its folder (default: the model's)")
	steps := fs.Int("steps", 512, "tokens to generate at most per reply")
	var so runtime.SamplerOptions
	temp := fs.Float64("temperature", 0.8, "sampling temperature; 0 is greedy")
	fs.IntVar(&so.TopK, "top-k", 40, "sample among the K most likely tokens (0: all)")
	topP := fs.Float64("top-p", 0.95, "nucleus sampling threshold (1: off)")
	minP := fs.Float64("min-p", 0.05, "drop tokens below this fraction of the most likely")
	rep := fs.Float64("repeat-penalty", 1.1, "penalty for recently seen tokens (1: off)")
	fs.IntVar(&so.RepeatLastN, "repeat-last-n", 64, "how many recent tokens the penalty looks at")
	seed := fs.Int64("seed", -1, "random seed (-1: from the clock)")
	return func(ctx context.Context, e *env) error {
		if *steps <= 0 {
			return usagef("--steps %d must be > 0", *steps)
		}
		so.Temperature, so.TopP, so.MinP, so.RepeatPenalty = float32(*temp), float32(*topP), float32(*minP), float32(*rep)
		if *seed < 0 {
			so.Seed = uint64(time.Now().UnixNano())
		} else {
			so.Seed = uint64(*seed)
		}
		if err := so.Validate(); err != nil {
			return usageError{err}
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		r, err := chatRenderer(*template, mf.tokenizer, mf.model)
		if err != nil {
			return err
		}
		if _, plain := r.(chat.Plain); plain {
			fmt.Fprintln(e.stderr, "the model has no chat template: using plain \"User: ...\" / \"Assistant:\" lines")
		}
		s := &chatSession{eng: eng, tok: eng.Tokenizer(), r: r, steps: *steps, sampler: so, e: e}
		if *system != "" {
			s.system = *system
		}
		if *prompt != "" {
			s.history = append(s.history, chat.Message{Role: "user", Content: *prompt})
			st, err := s.reply(ctx, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "%s: %d prompt tokens, %d generated (%s); prefill %.1f tok/s, decode %.1f tok/s\n",
				eng.Backend().Name(), st.PromptTokens, st.Generated, ending(st, eng.Model().Config.Context), st.PrefillRate(), st.DecodeRate())
			return nil
		}
		return s.interactive(ctx)
	}
}

// chatRenderer finds the chat template: --template, the tokenizer_config.json
// beside a --tokenizer tokenizer.json, the GGUF's tokenizer.chat_template,
// and otherwise the plain format.
func chatRenderer(template, tokPath, modelPath string) (chat.Renderer, error) {
	if template != "" {
		if st, err := os.Stat(template); err == nil && (st.IsDir() || filepath.Ext(template) == ".json") {
			return chat.FromConfig(template)
		}
		src, err := os.ReadFile(template)
		if err != nil {
			return nil, err
		}
		return chat.New(string(src))
	}
	var t *chat.Template
	var err error
	switch {
	case tokPath != "" && !isGGUF(tokPath):
		t, err = chat.FromConfig(tokPath)
	case tokPath != "":
		t, err = chat.FromGGUF(tokPath)
	case isGGUF(modelPath):
		t, err = chat.FromGGUF(modelPath)
	default:
		return chat.Plain{}, nil
	}
	if errors.Is(err, chat.ErrNoTemplate) {
		return chat.Plain{}, nil
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "GGUF"
}

// chatSession is a conversation with one model.
type chatSession struct {
	eng     *runtime.Engine
	tok     tokenizer.Tokenizer
	r       chat.Renderer
	steps   int
	sampler runtime.SamplerOptions
	e       *env

	system  string
	history []chat.Message // without the system message
	// images are the conversation's images, in order, each where a
	// message's content has runtime.ImageMarker; pending are those /image
	// added for the next message.
	images  []*vision.Image
	pending int
}

// messages is the conversation as the template sees it.
func (s *chatSession) messages() []chat.Message {
	if s.system == "" {
		return s.history
	}
	return append([]chat.Message{{Role: "system", Content: s.system}}, s.history...)
}

// prompt renders the conversation and encodes it. Rendered templates hold
// special tokens as text, so they are encoded with those recognised, and
// BOS comes from the template when it writes bos_token, else from the
// tokenizer when the model wants one.
func (s *chatSession) prompt() ([]int32, error) {
	bos, eos := s.tok.BOS(), s.tok.EOS()
	text, err := s.r.Render(s.messages(), chat.Options{BOS: s.tok.Piece(bos), EOS: s.tok.Piece(eos), AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	var ids []int
	if _, plain := s.r.(chat.Plain); plain {
		ids = s.tok.Encode(text, true)
	} else if bosText := s.tok.Piece(bos); bos >= 0 && bosText != "" && strings.HasPrefix(text, bosText) {
		ids = append([]int{bos}, tokenizer.EncodeSpecial(s.tok, text[len(bosText):], false)...)
	} else {
		ids = tokenizer.EncodeSpecial(s.tok, text, true)
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

// request is the engine's request for the conversation: its prompt's ids,
// or, with images, its rendered text (the engine tokenizes the text
// around each image as llama.cpp's mtmd does, BOS first).
func (s *chatSession) request() (runtime.Request, error) {
	req := runtime.Request{MaxTokens: s.steps, Sampler: s.sampler}
	if len(s.images) == 0 {
		ids, err := s.prompt()
		req.Tokens = ids
		return req, err
	}
	bos := s.tok.Piece(s.tok.BOS())
	text, err := s.r.Render(s.messages(), chat.Options{BOS: bos, EOS: s.tok.Piece(s.tok.EOS()), AddGenerationPrompt: true})
	if err != nil {
		return req, err
	}
	if bos != "" {
		text = strings.TrimPrefix(text, bos)
	}
	req.Prompt, req.Images = text, s.images
	return req, nil
}

// reply generates the assistant's answer to the conversation, streaming it
// to stdout, and adds it to the history. It stops at the tokenizer's end
// tokens, after --steps tokens, or when stop receives (Ctrl-C), keeping
// what was said so far.
func (s *chatSession) reply(ctx context.Context, stop <-chan os.Signal) (runtime.Stats, error) {
	req, err := s.request()
	if err != nil {
		return runtime.Stats{}, err
	}
	out := bufio.NewWriter(s.e.stdout)
	var text strings.Builder
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := make(chan struct{})
	var once sync.Once
	interrupt := func() { once.Do(func() { close(interrupted); cancel() }) }
	// While the model reads the prompt no token comes, so a watcher takes
	// Ctrl-C and cancels the generation. At the first token the token loop
	// takes over and the watcher is gone before it checks: a watcher that
	// had received the signal but not yet closed interrupted would let a
	// fast model finish the reply.
	handOver := func() {}
	if stop != nil {
		quit, exited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(exited)
			select {
			case <-stop:
				interrupt()
			case <-quit:
			}
		}()
		var handed sync.Once
		handOver = func() { handed.Do(func() { close(quit); <-exited }) }
	}
	st, err := s.eng.Generate(ctx, req, func(t runtime.Token) error {
		handOver()
		select {
		case <-interrupted:
			return errInterrupted
		case <-stop:
			interrupt()
			return errInterrupted
		default:
		}
		if tokenizer.IsEnd(s.tok, int(t.ID)) {
			return errEndOfTurn
		}
		piece := t.Text
		if text.Len() == 0 {
			// The reply's first token often carries the space that
			// followed "Assistant:"; it is not part of the answer.
			piece = strings.TrimLeft(piece, " ")
		}
		text.WriteString(piece)
		if _, err := out.WriteString(piece); err != nil {
			return err
		}
		return out.Flush()
	})
	fmt.Fprintln(out)
	out.Flush()
	handOver()
	select {
	case <-interrupted:
		err = errInterrupted
	default:
	}
	if err == nil || errors.Is(err, errEndOfTurn) || errors.Is(err, errInterrupted) {
		s.history = append(s.history, chat.Message{Role: "assistant", Content: strings.TrimSpace(text.String())})
	}
	if errors.Is(err, errEndOfTurn) {
		err = nil
	}
	return st, err
}

// interactive reads messages from stdin, one a line, until end of input,
// /exit or Ctrl-C at the prompt.
func (s *chatSession) interactive(ctx context.Context) error {
	// Ctrl-C belongs to chat now: the process-wide interrupt, which cancels
	// ctx, must not end the session.
	ctx = context.WithoutCancel(ctx)
	sig, stopSignals := interrupts()
	defer stopSignals()
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.e.stdin)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()
	fmt.Fprintln(s.e.stderr, chatHelp)
	for {
		fmt.Fprint(s.e.stdout, "> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(s.e.stdout)
				return <-readErr
			}
			line = l
		case <-sig:
			fmt.Fprintln(s.e.stdout)
			return nil
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case line == "/exit" || line == "/quit":
			return nil
		case line == "/reset":
			s.history, s.images, s.pending = nil, nil, 0
			fmt.Fprintln(s.e.stderr, "(conversation forgotten)")
			continue
		case line == "/system" || strings.HasPrefix(line, "/system "):
			s.system = strings.TrimSpace(strings.TrimPrefix(line, "/system"))
			fmt.Fprintf(s.e.stderr, "(system message: %q)\n", s.system)
			continue
		case line == "/help":
			fmt.Fprintln(s.e.stderr, chatHelp)
			continue
		case line == "/image" || strings.HasPrefix(line, "/image "):
			if err := s.addImage(strings.TrimSpace(strings.TrimPrefix(line, "/image"))); err != nil {
				fmt.Fprintf(s.e.stderr, "error: %v\n", err)
			}
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(s.e.stderr, "unknown command %s; %s\n", strings.Fields(line)[0], chatHelp)
			continue
		}
		added := s.pending
		s.history = append(s.history, chat.Message{Role: "user", Content: strings.Repeat(runtime.ImageMarker, added) + line})
		s.pending = 0
		forgot, err := s.fit(ctx)
		if forgot > 0 {
			fmt.Fprintf(s.e.stderr, "(the %d oldest messages forgotten, to leave the reply room in the context of %d tokens)\n", forgot, s.eng.Model().Config.Context)
		}
		if err == nil {
			_, err = s.reply(ctx, sig)
		}
		switch {
		case errors.Is(err, errInterrupted):
			fmt.Fprintln(s.e.stderr, "(reply stopped)")
		case err != nil:
			// The message stays unanswered: drop it (and its images) so
			// the next one can go.
			s.history = s.history[:len(s.history)-1]
			s.images = s.images[:len(s.images)-added]
			fmt.Fprintf(s.e.stderr, "error: %v", err)
			if errors.Is(err, runtime.ErrContextFull) {
				fmt.Fprint(s.e.stderr, " (the message is too long even alone; --context widens it)")
			}
			fmt.Fprintln(s.e.stderr)
		}
		// A Ctrl-C that came as the reply ended was meant for the reply.
		select {
		case <-sig:
		default:
		}
	}
}

// fit forgets the oldest messages, a user's and the reply to it at a
// time, until the conversation's prompt leaves the reply room in the
// context (--steps tokens, or half the context if that is less), as
// ollama's and llama.cpp's chats go on past a full context where this one
// stopped until /reset. The newest message stays, with what room is left;
// for one longer than the context alone nothing is forgotten, and the
// reply's error says so. It returns how many messages it forgot.
func (s *chatSession) fit(ctx context.Context) (int, error) {
	size := s.eng.Model().Config.Context
	limit := size - min(s.steps, size/2)
	history, images := s.history, s.images
	forgot := 0
	for {
		req, err := s.request()
		if err != nil {
			return forgot, err
		}
		ids, err := s.eng.PromptTokensContext(ctx, req)
		full := errors.Is(err, runtime.ErrContextFull)
		switch {
		case err == nil && (len(ids) <= limit || len(s.history) <= 1):
			return forgot, nil
		case full && len(s.history) <= 1:
			s.history, s.images = history, images
			return 0, nil
		case err != nil && !full:
			return forgot, err
		}
		n := 1
		if s.history[1].Role == "assistant" && len(s.history) > 2 {
			n = 2
		}
		for _, m := range s.history[:n] {
			s.images = s.images[strings.Count(m.Content, runtime.ImageMarker):]
		}
		s.history = s.history[n:]
		forgot += n
	}
}

// addImage decodes the image at path for the next message.
func (s *chatSession) addImage(path string) error {
	if path == "" {
		return errors.New("/image needs a file: /image PATH")
	}
	if !s.eng.HasVision() {
		return runtime.ErrNoVision
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	img, err := vision.Decode(data, vision.DefaultLimits)
	if err != nil {
		return err
	}
	s.images, s.pending = append(s.images, img), s.pending+1
	fmt.Fprintf(s.e.stderr, "(image %s, %d × %d, for the next message)\n", filepath.Base(path), img.W, img.H)
	return nil
}
