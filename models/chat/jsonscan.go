package chat

// jsonScan finds the end of a JSON object written a byte at a time (the
// arguments of Mistral v11's, DeepSeek's and harmony's calls, which are
// the bare object): it tracks strings and brackets, nothing more, so the
// object's bytes can be passed on as they come.
type jsonScan struct {
	depth     int
	inStr     bool
	esc       bool
	started   bool
	done, bad bool
}

// feed reads one byte and reports whether it is part of the object
// (spaces before it are not). After the object's closing brace done is
// set; a first byte other than "{" sets bad.
func (s *jsonScan) feed(c byte) bool {
	switch {
	case s.done || s.bad:
		return false
	case !s.started:
		if isSpace(c) {
			return false
		}
		if c != '{' {
			s.bad = true
			return false
		}
		s.started, s.depth = true, 1
		return true
	case s.inStr && s.esc:
		s.esc = false
	case s.inStr && c == '\\':
		s.esc = true
	case c == '"':
		s.inStr = !s.inStr
	case s.inStr:
	case c == '{' || c == '[':
		s.depth++
	case c == '}' || c == ']':
		s.depth--
		s.done = s.depth == 0
	}
	return true
}
