package runtime

import "strings"

// stopper finds a request's stop strings in the text a sequence generates,
// across token boundaries. Text that might be the start of a stop string
// is held back until the next tokens say whether it is: a client never sees
// any part of a stop string, and sees everything else exactly once.
type stopper struct {
	stops   []string
	longest int // bytes of the longest stop string
	held    string
}

func newStopper(stops []string) stopper {
	st := stopper{stops: stops}
	for _, s := range stops {
		st.longest = max(st.longest, len(s))
	}
	return st
}

// feed adds the text of a new token. It returns the text that can be
// emitted now and, when a stop string is complete, that string: then out
// is the text before it, and everything after the stop is dropped.
func (st *stopper) feed(text string) (out, stop string) {
	t := st.held + text
	st.held = ""
	at := -1
	for _, s := range st.stops {
		if i := strings.Index(t, s); i >= 0 && (at < 0 || i < at) {
			at, stop = i, s
		}
	}
	if at >= 0 {
		return t[:at], stop
	}
	// Hold the longest tail of t that some stop string starts with.
	for k := min(len(t), st.longest-1); k > 0; k-- {
		tail := t[len(t)-k:]
		for _, s := range st.stops {
			if strings.HasPrefix(s, tail) {
				st.held = tail
				return t[:len(t)-k], ""
			}
		}
	}
	return t, ""
}

// flush returns the text held back, at the end of a generation that did
// not stop at a stop string.
func (st *stopper) flush() string {
	t := st.held
	st.held = ""
	return t
}
