package chat

import (
	"strconv"
	"strings"
	"time"
)

// strftime formats t like Python's time.strftime, for the strftime_now
// global (Llama 3.1's template prints today's date with "%d %b %Y").
// Directives it does not know are written as they are.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	pad := func(v, width int) {
		s := strconv.Itoa(v)
		for len(s) < width {
			s = "0" + s
		}
		b.WriteString(s)
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'd':
			pad(t.Day(), 2)
		case 'e':
			b.WriteString(strings.Repeat(" ", 1-min(1, t.Day()/10)) + strconv.Itoa(t.Day()))
		case 'H':
			pad(t.Hour(), 2)
		case 'I':
			pad((t.Hour()+11)%12+1, 2)
		case 'j':
			pad(t.YearDay(), 3)
		case 'm':
			pad(int(t.Month()), 2)
		case 'M':
			pad(t.Minute(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'S':
			pad(t.Second(), 2)
		case 'y':
			pad(t.Year()%100, 2)
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
