package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports how far a long task has come. On a terminal it is a
// bar redrawn in place; anywhere else (a log file, a pipe, a test's
// buffer) a bar would be a stream of carriage-return redraws, so it stays
// silent until Finish writes one summary line. Every command that shows
// progress makes it with newProgress.
type progress struct {
	w           io.Writer
	bar         *progressbar.ProgressBar // nil off a terminal
	desc, unit  string
	total, done int64
	start       time.Time
	finished    bool
}

// newProgress starts reporting a task of total units (unit "B" counts
// bytes, shown in KiB, MiB, ...) described as desc on w, with a bar when
// w is a terminal.
func newProgress(w io.Writer, desc string, total int64, unit string) *progress {
	return newProgressOn(w, isTerminal(w), desc, total, unit)
}

// newProgressOn is newProgress with the terminal test done by the caller.
func newProgressOn(w io.Writer, tty bool, desc string, total int64, unit string) *progress {
	p := &progress{w: w, desc: desc, unit: unit, total: total, start: time.Now()}
	if tty {
		opts := []progressbar.Option{progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(desc), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100 * time.Millisecond), progressbar.OptionClearOnFinish()}
		if unit == "B" {
			opts = append(opts, progressbar.OptionShowBytes(true))
		} else {
			opts = append(opts, progressbar.OptionSetItsString(unit), progressbar.OptionShowIts())
		}
		p.bar = progressbar.NewOptions64(total, opts...)
	}
	return p
}

// isTerminal says whether w is a terminal: an *os.File (or anything with
// a file descriptor) that term.IsTerminal accepts.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// Set records that n units are done.
func (p *progress) Set(n int64) {
	p.done = n
	if p.bar != nil {
		p.bar.Set64(n)
	}
}

// Add records n more units done.
func (p *progress) Add(n int64) { p.Set(p.done + n) }

// Write counts len(b) units (bytes), so that a copy can report through it.
func (p *progress) Write(b []byte) (int, error) {
	p.Add(int64(len(b)))
	return len(b), nil
}

// Close is Finish, for callers that take an io.WriteCloser.
func (p *progress) Close() error {
	p.Finish()
	return nil
}

// Finish ends the report: it clears the bar, or off a terminal writes the
// summary line. Calls after the first do nothing.
func (p *progress) Finish() {
	if p.finished {
		return
	}
	p.finished = true
	if p.bar != nil {
		p.bar.Finish()
		return
	}
	elapsed := time.Since(p.start)
	done, total, unit := fmt.Sprint(p.done), fmt.Sprint(p.total), p.unit
	rate := ""
	if unit == "B" {
		done, total, unit = scaleBytes(p.done, p.total)
		if s := elapsed.Seconds(); s > 0 {
			r, _, u := scaleBytes(int64(float64(p.done)/s), 0)
			rate = fmt.Sprintf(", %s %s/s", r, u)
		}
	} else if s := elapsed.Seconds(); s > 0 {
		rate = fmt.Sprintf(", %.0f %s/s", float64(p.done)/s, unit)
	}
	fmt.Fprintf(p.w, "%s: %s/%s %s in %s%s\n", p.desc, done, total, unit, elapsed.Round(time.Millisecond), rate)
}

// scaleBytes writes n and total in the binary unit that suits total (or n
// when total is 0), with one decimal.
func scaleBytes(n, total int64) (string, string, string) {
	ref := max(total, n)
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i, div := 0, 1.0
	for i < len(units)-1 && float64(ref)/div >= 1024 {
		i++
		div *= 1024
	}
	if i == 0 {
		return fmt.Sprint(n), fmt.Sprint(total), "B"
	}
	return fmt.Sprintf("%.1f", float64(n)/div), fmt.Sprintf("%.1f", float64(total)/div), units[i]
}
