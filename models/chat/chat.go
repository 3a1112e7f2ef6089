// Package chat turns a conversation into the prompt a chat model was
// trained on, by rendering the model's Jinja chat template (GGUF's
// tokenizer.chat_template or tokenizer_config.json's chat_template) with
// gonja, the way Hugging Face's apply_chat_template does.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant" or "tool"
	Content string
	// ToolCalls are the calls an assistant message made; ToolCallID is the
	// call a tool message answers.
	ToolCalls  []ToolCall
	ToolCallID string
	// Reasoning is what an assistant reasoned before its content, as a
	// reply's parser split it off; templates that render it back read
	// reasoning_content (Qwen3, DeepSeek) or thinking (gpt-oss).
	Reasoning string
}

// ToolCall is a function call: its id, the function's name and its
// arguments as a JSON object.
type ToolCall struct {
	ID, Name  string
	Arguments map[string]any
}

// Options are the variables a template sees besides messages.
type Options struct {
	// BOS and EOS are the text of the model's special tokens, bos_token and
	// eos_token in the template.
	BOS, EOS string
	// AddGenerationPrompt ends the prompt with the start of the assistant's
	// turn, for generating a reply.
	AddGenerationPrompt bool
	// Tools are the tool definitions ({"type": "function", "function":
	// {"name", "description", "parameters"}}) the template renders, as
	// apply_chat_template's tools.
	Tools []any
	// Vars are further variables, such as enable_thinking for Qwen3.
	Vars map[string]any
	// Now is the time strftime_now formats; zero means the current time.
	Now time.Time
}

// Renderer renders a conversation into a prompt.
type Renderer interface {
	Render(messages []Message, o Options) (string, error)
}

// Template is a parsed Jinja chat template. It is safe for concurrent use.
type Template struct {
	source string
	tpl    *exec.Template
}

const rootName = "chat_template"

// New parses a Jinja chat template. The environment is the one
// apply_chat_template uses: trim_blocks and lstrip_blocks on, and the
// globals raise_exception and strftime_now. Templates cannot include or
// import other files.
func New(source string) (*Template, error) {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	env := &exec.Environment{
		Context:           gonja.DefaultContext.Inherit(),
		Filters:           filters(),
		Tests:             gonja.DefaultEnvironment.Tests,
		ControlStructures: gonja.DefaultEnvironment.ControlStructures,
		Methods:           gonja.DefaultEnvironment.Methods,
	}
	env.Context.Set(condFunc, conditional)
	env.Context.Set(atFunc, at)
	env.Context.Set("raise_exception", raiseException)
	tpl, err := exec.NewTemplate(rootName, cfg, sourceLoader{rewriteConditionals(source)}, env)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", firstLine(err))
	}
	return &Template{source: source, tpl: tpl}, nil
}

// Source returns the template as given to New.
func (t *Template) Source() string { return t.source }

// Render renders messages. A template's raise_exception (Gemma's, when
// roles do not alternate) comes back as an error.
func (t *Template) Render(messages []Message, o Options) (string, error) {
	msgs := make([]map[string]any, len(messages))
	var nulled []map[string]any // assistant messages of calls alone, their content null
	for i, m := range messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
		if len(m.ToolCalls) > 0 {
			var calls []any
			for _, c := range m.ToolCalls {
				calls = append(calls, map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": templateArgs(c.Arguments)}})
			}
			msgs[i]["tool_calls"] = calls
			if m.Content == "" {
				// OpenAI's clients send null content beside calls, and
				// templates test for it (DeepSeek R1's renders calls only
				// then); those that take only a string get "" (below).
				msgs[i]["content"] = nil
				nulled = append(nulled, msgs[i])
			}
		}
		if m.ToolCallID != "" {
			msgs[i]["tool_call_id"] = m.ToolCallID
		}
		if m.Reasoning != "" {
			msgs[i]["reasoning_content"] = m.Reasoning
			msgs[i]["thinking"] = m.Reasoning
		}
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars := map[string]any{
		"messages":              msgs,
		"bos_token":             o.BOS,
		"eos_token":             o.EOS,
		"add_generation_prompt": o.AddGenerationPrompt,
		"tools":                 nil, // as apply_chat_template passes when there are none
		"strftime_now":          func(format string) string { return strftime(now, format) },
	}
	if len(o.Tools) > 0 {
		vars["tools"] = o.Tools
	}
	for k, v := range o.Vars {
		vars[k] = v
	}
	out, err := t.tpl.ExecuteToString(exec.NewContext(maps.Clone(vars)))
	if err != nil && len(nulled) > 0 {
		for _, m := range nulled {
			m["content"] = ""
		}
		out, err = t.tpl.ExecuteToString(exec.NewContext(maps.Clone(vars)))
	}
	if err != nil {
		return "", fmt.Errorf("chat template: %w", firstLine(err))
	}
	return out, nil
}

// Plain is the prompt format for models without a chat template (base
// models such as stories260K): each turn on its own line as "User: ...",
// "Assistant: ..." or the system text alone, then "Assistant:" to ask for a
// reply. It is a convention, not anything such a model was trained on.
type Plain struct{}

// Render renders messages in the plain format.
func (Plain) Render(messages []Message, o Options) (string, error) {
	var b strings.Builder
	if len(o.Tools) > 0 {
		// No template to say how: list the tools in Qwen's format, which is
		// also how replies call them.
		b.WriteString("Tools: ")
		for _, t := range o.Tools {
			js, _ := json.Marshal(t)
			b.Write(js)
			b.WriteString(" ")
		}
		b.WriteString("Call one as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>.\n")
	}
	for _, m := range messages {
		content := m.Content
		for _, c := range m.ToolCalls {
			js, _ := json.Marshal(map[string]any{"name": c.Name, "arguments": c.Arguments})
			content += "<tool_call>" + string(js) + "</tool_call>"
		}
		m.Content = content
		switch m.Role {
		case "system":
			b.WriteString(m.Content)
		case "user":
			b.WriteString("User: " + m.Content)
		case "assistant":
			b.WriteString("Assistant: " + m.Content)
		default:
			b.WriteString(strings.ToUpper(m.Role[:min(1, len(m.Role))]) + m.Role[min(1, len(m.Role)):] + ": " + m.Content)
		}
		b.WriteString("\n")
	}
	if o.AddGenerationPrompt {
		b.WriteString("Assistant:")
	}
	return b.String(), nil
}

// conditional is __tessera_if(cond, then[, else]); see rewriteConditionals.
func conditional(args *exec.VarArgs) *exec.Value {
	if len(args.Args) < 2 {
		return exec.AsValue(errors.New("internal conditional needs a condition and a value"))
	}
	if args.Args[0].IsTrue() {
		return args.Args[1]
	}
	if len(args.Args) > 2 {
		return args.Args[2]
	}
	return exec.AsValue(nil)
}

// at is __tessera_at(x, i): x[i] with i counted from the end when
// negative, as Python indexes; undefined (none) when out of range.
func at(args *exec.VarArgs) *exec.Value {
	if len(args.Args) != 2 || !args.Args[1].IsInteger() {
		return exec.AsValue(errors.New("internal subscript needs a value and an integer"))
	}
	x, i := args.Args[0], args.Args[1].Integer()
	if !x.IsList() && !x.IsString() {
		return exec.AsValue(nil)
	}
	n := x.Len()
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return exec.AsValue(nil)
	}
	return x.Index(i)
}

// raiseException is the raise_exception global of apply_chat_template.
func raiseException(msg string) (string, error) { return "", templateError(msg) }

// templateError is an error a template raised itself.
type templateError string

func (e templateError) Error() string { return string(e) }

// firstLine shortens gonja's errors, which quote the whole template.
func firstLine(err error) error {
	var te templateError
	if errors.As(err, &te) {
		return te
	}
	msg := err.Error()
	// gonja reports the exception as a failed call; the template's own
	// message is what a user needs.
	const raised = "function 'raise_exception': "
	if i := strings.LastIndex(msg, raised); i >= 0 {
		return templateError(msg[i+len(raised):])
	}
	if i := strings.Index(msg, "failed to parse template '"); i >= 0 {
		if j := strings.LastIndex(msg, "': "); j > i {
			msg = msg[:i] + "failed to parse template: " + msg[j+3:]
		}
	}
	return errors.New(msg)
}

// sourceLoader serves the template itself and refuses every other name, so
// a template from a model file cannot read files with include or import.
type sourceLoader struct{ src string }

func (l sourceLoader) Read(name string) (io.Reader, error) {
	if name != rootName {
		return nil, fmt.Errorf("chat templates cannot load %q", name)
	}
	return strings.NewReader(l.src), nil
}

func (l sourceLoader) Resolve(name string) (string, error) { return name, nil }

func (l sourceLoader) Inherit(string) (loaders.Loader, error) { return l, nil }
