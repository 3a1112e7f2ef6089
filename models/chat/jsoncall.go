package chat

// jsonCall reads a tool call written as a JSON object, {"name": ...,
// "arguments": {...}} (the key of the arguments is the format's), a byte
// at a time, so that the name is known as soon as its string closes and
// the arguments can be reported as they come. It keeps no text but the
// name and the id. A call is ready to report once its name is read and
// its arguments have begun as an object (or the object ended without
// them): an object whose "arguments" are no object is no call.
type jsonCall struct {
	argsKeys []string // the keys that hold the arguments

	st    jsonState
	key   []byte // the key being read, or read last
	str   []byte // the name or id string being read
	esc   bool   // a backslash was read in a string
	inStr bool   // inside a string of the arguments (or a skipped value)
	depth int    // brackets open in the arguments (or a skipped value)
	what  valueKind

	name, id string
	named    bool // the name is read
	argsOpen bool // the arguments began, with "{"
	sawArgs  bool
	bad      bool // not a call object: the text is not a call
}

// ready reports whether the call can be reported: named, and its
// arguments begun or absent.
func (j *jsonCall) ready() bool { return j.named && (j.argsOpen || j.st == jsDone) && !j.bad }

type jsonState uint8

const (
	jsStart  jsonState = iota // before the object
	jsKey                     // before a key (or the end of the object)
	jsKeyStr                  // in a key
	jsColon                   // after a key
	jsValue                   // before a value
	jsString                  // in the name's or id's string
	jsRaw                     // in the arguments, or a value skipped
	jsAfter                   // after a value
	jsDone                    // after the object
)

type valueKind uint8

const (
	vSkip valueKind = iota
	vName
	vID
	vArgs
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// feed reads one byte. It returns the bytes of the arguments that byte
// adds (nil when none, or when the name is not known yet: those are
// kept in args). done is set once the object has closed.
func (j *jsonCall) feed(c byte) (argBytes []byte, done bool) {
	switch j.st {
	case jsStart:
		switch {
		case isSpace(c):
		case c == '{':
			j.st = jsKey
		default:
			j.bad = true
		}
	case jsKey:
		switch {
		case isSpace(c) || c == ',':
		case c == '"':
			j.st, j.key = jsKeyStr, j.key[:0]
		case c == '}':
			j.st = jsDone
			return nil, true
		default:
			j.bad = true
		}
	case jsKeyStr:
		switch {
		case j.esc:
			j.esc = false
			j.key = append(j.key, c)
		case c == '\\':
			j.esc = true
		case c == '"':
			j.st = jsColon
		default:
			j.key = append(j.key, c)
		}
	case jsColon:
		switch {
		case isSpace(c):
		case c == ':':
			j.st = jsValue
			j.what = vSkip
			switch k := string(j.key); {
			case k == "name" && !j.named:
				j.what = vName
			case k == "id":
				j.what = vID
			case !j.sawArgs && j.isArgs(k):
				j.what, j.sawArgs = vArgs, true
			}
		default:
			j.bad = true
		}
	case jsValue:
		if isSpace(c) {
			break
		}
		if (j.what == vName || j.what == vID) && c == '"' {
			j.st, j.str = jsString, j.str[:0]
			break
		}
		if j.what == vName || j.what == vID {
			j.what = vSkip // a name that is not a string is no name
		}
		if j.what == vArgs {
			switch c {
			case '{':
				j.argsOpen = true
			case 'n': // null: no arguments
				j.what = vSkip
			default:
				j.bad = true
				return nil, false
			}
		}
		j.st, j.depth, j.inStr = jsRaw, 0, false
		return j.raw(c)
	case jsString:
		switch {
		case j.esc:
			j.esc = false
			j.str = append(j.str, unescape(c))
		case c == '\\':
			j.esc = true
		case c == '"':
			j.st = jsAfter
			if j.what == vName {
				j.name, j.named = string(j.str), true
			} else {
				j.id = string(j.str)
			}
		default:
			j.str = append(j.str, c)
		}
	case jsRaw:
		return j.raw(c)
	case jsAfter:
		switch {
		case isSpace(c):
		case c == ',':
			j.st = jsKey
		case c == '}':
			j.st = jsDone
			return nil, true
		default:
			j.bad = true
		}
	case jsDone:
		j.bad = true
	}
	return nil, false
}

// raw reads a byte of a value whose text is passed through (the
// arguments) or skipped: it ends at a comma or the object's brace outside
// any bracket or string, which is handed back to jsAfter.
func (j *jsonCall) raw(c byte) ([]byte, bool) {
	if !j.inStr && j.depth == 0 && (c == ',' || c == '}') {
		j.st = jsAfter
		return j.feed(c)
	}
	switch {
	case j.inStr && j.esc:
		j.esc = false
	case j.inStr && c == '\\':
		j.esc = true
	case c == '"':
		j.inStr = !j.inStr
	case j.inStr:
	case c == '{' || c == '[':
		j.depth++
	case c == '}' || c == ']':
		j.depth--
	}
	if j.what != vArgs {
		return nil, false
	}
	if j.depth == 0 && !j.inStr && isSpace(c) {
		return nil, false // the spaces around a value are not the value
	}
	return []byte{c}, false
}

// pendingCall is a jsonCall being reported: its arguments are held until
// it is ready, then reported as they come.
type pendingCall struct {
	j        jsonCall
	k        int // the call's index once reported
	reported bool
	held     []byte
}

func newPendingCall(argsKeys []string) pendingCall {
	return pendingCall{j: jsonCall{argsKeys: argsKeys}}
}

// feed reads byte c of the call; done: its object has closed.
func (pc *pendingCall) feed(p *ReplyParser, c byte) (done bool) {
	out, done := pc.j.feed(c)
	if !pc.reported {
		pc.held = append(pc.held, out...)
		if pc.j.ready() {
			pc.k, pc.reported = p.startCall(pc.j.name, pc.j.id), true
			p.args(pc.k, string(pc.held))
			pc.held = nil
		}
	} else {
		p.args(pc.k, string(out))
	}
	if pc.reported && pc.j.id != "" && p.reply.Calls[pc.k].ID == "" {
		p.reply.Calls[pc.k].ID = pc.j.id // written after the name: too late for the stream's event
	}
	return done
}

// started reports whether the call was reported.
func (pc *pendingCall) started() bool { return pc.reported }

func (j *jsonCall) isArgs(k string) bool {
	for _, a := range j.argsKeys {
		if k == a {
			return true
		}
	}
	return false
}

// unescape is the byte a JSON escape \c stands for (a \u escape keeps its
// letter: names and ids are ASCII in practice).
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	}
	return c
}
