package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/models/gguf"
)

var stories = filepath.Join(shared, "stories260K.gguf")

// greedyArgs make replies reproducible and fast.
var greedyArgs = []string{"--device", "cpu", "--temperature", "0", "--repeat-penalty", "1", "--steps", "40"}

// continuation is what `tessera run` adds to prompt: the reply a chat
// should give to the same tokens.
func continuation(t *testing.T, model, prompt string) string {
	t.Helper()
	code, out, errOut := runCLI("run", "--model", model, "--device", "cpu", "--temperature", "0", "--steps", "40", "--prompt", prompt)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	rest, ok := strings.CutPrefix(out, prompt)
	if !ok {
		t.Fatalf("run output %q does not start with the prompt", out)
	}
	return strings.TrimLeft(strings.TrimSuffix(rest, "\n"), " ")
}

// stories260K has no chat template: one message goes out as plain
// "User:"/"Assistant:" lines, and the reply is the model's continuation
// of exactly those tokens.
func TestChatOneShot(t *testing.T) {
	args := append([]string{"chat", "--model", stories, "--prompt", "Once upon a time"}, greedyArgs...)
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := continuation(t, stories, "User: Once upon a time\nAssistant:")
	if out != want+"\n" || len(want) < 10 {
		t.Errorf("reply %q, want %q", out, want+"\n")
	}
	if !strings.Contains(errOut, "no chat template") || !strings.Contains(errOut, "tok/s") {
		t.Errorf("stderr: %q", errOut)
	}
}

// The interactive mode keeps the conversation, and /system, /reset and
// unknown commands do what they say.
func TestChatInteractive(t *testing.T) {
	input := "Once upon a time\n/system Tell a story.\n/bogus\n/reset\nThe cat\n"
	code, out, errOut := runCLIInput(input, append([]string{"chat", "--model", stories}, greedyArgs...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	first := continuation(t, stories, "User: Once upon a time\nAssistant:")
	// After /reset the history is gone but the system message stays.
	second := continuation(t, stories, "Tell a story.\nUser: The cat\nAssistant:")
	want := "> " + first + "\n> > > > " + second + "\n> \n"
	if out != want {
		t.Errorf("stdout\n%q\nwant\n%q", out, want)
	}
	for _, w := range []string{`system message: "Tell a story."`, "unknown command /bogus", "conversation forgotten"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q: %q", w, errOut)
		}
	}

	// Without /reset the second message is answered after the first turn.
	code, out, _ = runCLIInput("Once upon a time\nThe cat\n", append([]string{"chat", "--model", stories}, greedyArgs...)...)
	history := "User: Once upon a time\nAssistant: " + first + "\nUser: The cat\nAssistant:"
	if want := "> " + first + "\n> " + continuation(t, stories, history) + "\n> \n"; code != 0 || out != want {
		t.Errorf("with history: exit %d\n%q\nwant\n%q", code, out, want)
	}
}

// A conversation past its context goes on: the oldest exchanges are
// forgotten, and each reply is then the model's continuation of what
// stays (here the newest message alone: one exchange and a message do not
// fit 40 tokens less the reply's 10; the third message alone leaves the
// reply 7); a message too long for the context alone is an error that
// forgets nothing, and the chat goes on.
func TestChatForgets(t *testing.T) {
	lines := []string{"Once upon a time there was a little girl", "She liked to play in the park with her dog",
		"One day the dog ran away into the woods", strings.Repeat("the big red ball ", 20), "The end of the story was happy"}
	args := append([]string{"chat", "--model", stories}, greedyArgs...)
	args = append(args, "--context", "40", "--steps", "10")
	code, out, errOut := runCLIInput(strings.Join(lines, "\n")+"\n", args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	reply := func(msg string, context string) string {
		code, out, errOut := runCLI("run", "--model", stories, "--device", "cpu", "--temperature", "0", "--steps", "10", "--context", context, "--prompt", "User: "+msg+"\nAssistant:")
		if code != 0 {
			t.Fatalf("run: exit %d: %s", code, errOut)
		}
		rest, _ := strings.CutPrefix(strings.TrimSuffix(out, "\n"), "User: "+msg+"\nAssistant:")
		return strings.TrimLeft(rest, " ")
	}
	want := "> " + reply(lines[0], "40") + "\n> " + reply(lines[1], "40") + "\n> " + reply(lines[2], "40") + "\n> \n> " + reply(lines[4], "40") + "\n> \n"
	if out != want {
		t.Errorf("stdout\n%q\nwant\n%q", out, want)
	}
	if n := strings.Count(errOut, "(the 2 oldest messages forgotten, to leave the reply room in the context of 40 tokens)"); n != 3 {
		t.Errorf("stderr says %d times that two messages were forgotten, want 3: %q", n, errOut)
	}
	if !strings.Contains(errOut, "error: ") || !strings.Contains(errOut, "--context widens it") {
		t.Errorf("the message too long for the context alone: stderr %q", errOut)
	}

	// The conversation a message too long for the context met is the one
	// the next message continues.
	code, out, errOut = runCLIInput("Hi\n"+lines[3]+"\nYo\n", append(args[:len(args)-4:len(args)-4], "--context", "64", "--steps", "10")...)
	first := reply("Hi", "64")
	if want := "> " + first + "\n> \n> " + reply("Hi\nAssistant: "+strings.TrimSpace(first)+"\nUser: Yo", "64") + "\n> \n"; code != 0 || out != want || strings.Contains(errOut, "forgotten") {
		t.Errorf("after a message too long: exit %d\n%q\nwant\n%q\nstderr %q", code, out, want, errOut)
	}
}

// interruptingWriter sends Ctrl-C when the first reply reaches it.
type interruptingWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	sig  chan os.Signal
	sent bool
}

func (w *interruptingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := string(p); !w.sent && s != "> " && strings.TrimSpace(s) != "" {
		w.sent = true
		w.sig <- os.Interrupt
	}
	return w.b.Write(p)
}

// Ctrl-C during a reply stops the reply, keeps what was said, and the
// chat goes on.
func TestChatInterrupt(t *testing.T) {
	sig := make(chan os.Signal, 1)
	saved := interrupts
	interrupts = func() (<-chan os.Signal, func()) { return sig, func() {} }
	defer func() { interrupts = saved }()

	w := &interruptingWriter{sig: sig}
	var errb strings.Builder
	args := append([]string{"chat", "--model", stories}, greedyArgs...)
	code := cli(context.Background(), args, &env{stdout: w, stderr: &errb, stdin: strings.NewReader("Once upon a time\n/exit\n")})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	out := w.b.String()
	full := continuation(t, stories, "User: Once upon a time\nAssistant:")
	reply, ok := strings.CutPrefix(out, "> ")
	reply, ok2 := strings.CutSuffix(reply, "\n> ")
	if !ok || !ok2 || reply == "" || len(reply) >= len(full) || !strings.HasPrefix(full, reply) {
		t.Errorf("stdout %q: want a short prefix of %q between prompts", out, full)
	}
	if !strings.Contains(errb.String(), "reply stopped") {
		t.Errorf("stderr: %q", errb.String())
	}
}

// A GGUF's tokenizer.chat_template is used: here stories260K with a small
// template added, whose rendering the reply continues.
func TestChatTemplateFromGGUF(t *testing.T) {
	f, err := gguf.Open(stories)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	kv := append([]gguf.KV{}, f.KV...)
	kv = append(kv, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.StringValue(
		"{{ bos_token }}{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}\n{% endfor %}" +
			"{% if add_generation_prompt %}{{ ('STORY' if messages[-1].content.startswith('Once') else 'ANSWER') + ':' }}{% endif %}")})
	var tensors []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.ReadTensor(ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
	}
	path := filepath.Join(t.TempDir(), "stories-chat.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(out, kv, tensors); err != nil {
		t.Fatal(err)
	}
	out.Close()

	code, reply, errOut := runCLI(append([]string{"chat", "--model", path, "--prompt", "Once upon a time  ", "--system", "Be kind."}, greedyArgs...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "no chat template") {
		t.Errorf("template not found: %s", errOut)
	}
	// bos_token is <s>, which the prompt gets as BOS; the rest is text.
	if want := continuation(t, path, "SYSTEM: Be kind.\nUSER: Once upon a time\nSTORY:"); reply != want+"\n" {
		t.Errorf("reply %q, want %q", reply, want+"\n")
	}
}
