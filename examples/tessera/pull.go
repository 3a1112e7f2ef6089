package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tessera-llm/tessera/models/hub"
)

// The model cache's commands. A model reference (hf.co/OWNER/REPO:QUANT,
// OWNER/REPO/FILE.gguf or an https URL) works wherever --model takes a
// path; these commands manage what such references pulled.

func setupPull(fs *flag.FlagSet) func(context.Context, *env) error {
	connect := fs.Duration("connect-timeout", hub.DefaultDialTimeout, "limit on connecting to a host, and again on the TLS handshake (negative: none)")
	header := fs.Duration("header-timeout", hub.DefaultHeaderTimeout, "limit on waiting for a response's headers (negative: none)")
	stall := fs.Duration("stall-timeout", hub.DefaultStallTimeout, "end a download that receives nothing for this long; a slow one that keeps receiving goes on (negative: none)")
	retries := fs.Int("retries", 3, "how many times an interrupted or stalled download resumes before the pull fails")
	return func(ctx context.Context, e *env) error {
		if fs.NArg() == 0 {
			return usagef("want a model reference: hf.co/OWNER/REPO:QUANT, OWNER/REPO/FILE.gguf or an https URL")
		}
		if *retries < 0 {
			return usagef("--retries is a count: %d", *retries)
		}
		refs, err := parseRefs(fs.Args())
		if err != nil {
			return err
		}
		c, err := hubClient(e, false)
		if err != nil {
			return err
		}
		// A zero limit would mean the default to the client: here it
		// means none, as a negative one does.
		limit := func(d time.Duration) time.Duration {
			if d == 0 {
				return -1
			}
			return d
		}
		c.DialTimeout, c.TLSTimeout = limit(*connect), limit(*connect)
		c.HeaderTimeout, c.StallTimeout = limit(*header), limit(*stall)
		if c.Retries = *retries; *retries == 0 {
			c.Retries = -1
		}
		for _, r := range refs {
			entry, err := c.Pull(ctx, r)
			if err != nil {
				return timeoutHint(err)
			}
			p, err := c.Cache.Path(entry)
			if err != nil {
				return err
			}
			// The path goes to stdout, so that $(tessera pull REF) is it.
			fmt.Fprintf(e.stderr, "%s: %s in %d file(s)\n", entry.Ref, hub.FormatSize(entry.Size), len(entry.Files))
			fmt.Fprintln(e.stdout, p)
		}
		return nil
	}
}

// timeoutHint adds to a pull's timeout the flag that sets its limit.
func timeoutHint(err error) error {
	var te *hub.TimeoutError
	if !errors.As(err, &te) {
		return err
	}
	flag := map[hub.Stage]string{hub.StageDial: "--connect-timeout", hub.StageTLS: "--connect-timeout",
		hub.StageHeaders: "--header-timeout", hub.StageBody: "--stall-timeout"}[te.Stage]
	return fmt.Errorf("%w [%s sets the limit]", err, flag)
}

func setupLs(fs *flag.FlagSet) func(context.Context, *env) error {
	paths := fs.Bool("paths", false, "show each model's file instead of when it was pulled")
	return func(ctx context.Context, e *env) error {
		c, err := hubClient(e, true)
		if err != nil {
			return err
		}
		entries, err := c.Cache.Entries()
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			fmt.Fprintf(e.stderr, "no models in %s; pull one with 'tessera pull REF'\n", c.Cache.Dir)
			return nil
		}
		w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		last := "PULLED"
		if *paths {
			last = "PATH"
		}
		fmt.Fprintf(w, "REF\tSIZE\tFILES\t%s\n", last)
		var total int64
		var damaged []hub.Entry
		for _, en := range entries {
			// A damaged entry is listed, marked, and explained below:
			// its numbers are the tampered record's, not the cache's.
			if en.Damaged != nil {
				damaged = append(damaged, en)
				fmt.Fprintf(w, "%s\t-\t-\tDAMAGED\n", en.Display())
				continue
			}
			col := en.Time.Local().Format("2006-01-02 15:04")
			if *paths {
				if col, err = c.Cache.Path(en); err != nil {
					col = "(missing: pull it again)"
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", en.Ref, hub.FormatSize(en.Size), len(en.Files), col)
			total += en.Size
		}
		if err := w.Flush(); err != nil {
			return err
		}
		summary := fmt.Sprintf("%d model(s), %s, in %s", len(entries)-len(damaged), hub.FormatSize(total), c.Cache.Dir)
		if len(damaged) > 0 {
			summary += fmt.Sprintf("; %d damaged entries, never used:", len(damaged))
		}
		fmt.Fprintln(e.stderr, summary)
		for _, en := range damaged {
			fix := fmt.Sprintf("'tessera rm %s' drops it from the index and deletes nothing", en.Ref)
			if _, err := hub.Parse(en.Ref); err != nil {
				fix = "edit " + filepath.Join(c.Cache.Dir, "index.json") + " to drop it"
			}
			fmt.Fprintf(e.stderr, "  %v; %s\n", en.Damaged, fix)
		}
		return nil
	}
}

func setupRm(fs *flag.FlagSet) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		if fs.NArg() == 0 {
			return usagef("want the reference of a pulled model (see 'tessera ls')")
		}
		refs, err := parseRefs(fs.Args())
		if err != nil {
			return err
		}
		c, err := hubClient(e, true)
		if err != nil {
			return err
		}
		for _, r := range refs {
			gone, err := c.Cache.Remove(r)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "removed %s (%s)\n", gone.Ref, hub.FormatSize(gone.Size))
		}
		return nil
	}
}

func parseRefs(args []string) ([]hub.Ref, error) {
	var refs []hub.Ref
	for _, a := range args {
		r, err := hub.Parse(a)
		if err != nil {
			return nil, usageError{err}
		}
		refs = append(refs, r)
	}
	return refs, nil
}

// offlineFlag registers --offline on a command that takes --model.
func offlineFlag(fs *flag.FlagSet, p *bool) {
	fs.BoolVar(p, "offline", false, "use only models already in the cache: never touch the network (also TESSERA_OFFLINE=1)")
}

// hubClient is the model cache's client as the environment sets it up
// (TESSERA_CACHE, HF_ENDPOINT, HF_TOKEN, TESSERA_OFFLINE), offline too
// when asked, reporting to stderr: with a progress bar on a terminal, a
// line per file otherwise.
func hubClient(e *env, offline bool) (*hub.Client, error) {
	c, err := hub.FromEnv()
	if err != nil {
		return nil, err
	}
	c.Offline = c.Offline || offline
	c.Log = e.stderr
	if isTerminal(e.stderr) { // off a terminal the client's own line says it all
		c.Progress = func(label string, total, have int64) io.WriteCloser {
			p := newProgress(e.stderr, label, total, "B")
			p.Set(have)
			return p
		}
	}
	return c, nil
}

// modelPath is the one place a --model value becomes a path: an existing
// file or folder is itself; otherwise a value that reads as a model
// reference names a cached model, pulled first if it is missing. Anything
// else is left for the loader to report as a missing file.
func modelPath(ctx context.Context, e *env, value string, offline bool) (string, error) {
	if strings.TrimSpace(value) == "" {
		return value, nil
	}
	if _, err := os.Stat(value); !errors.Is(err, fs.ErrNotExist) {
		return value, nil
	}
	r, err := hub.Parse(value)
	if err != nil {
		return value, nil
	}
	c, err := hubClient(e, offline)
	if err != nil {
		return "", err
	}
	entry, err := c.Get(ctx, r)
	if err != nil {
		if r.URL == "" && !strings.HasPrefix(value, "hf.co/") && !strings.HasPrefix(value, "huggingface.co/") {
			return "", fmt.Errorf("%s is no file here, nor a model on the Hub: %w", value, err)
		}
		return "", err
	}
	// A split GGUF's shards are all in the cache, side by side: models.Open
	// finds them from the first, which Path names, once it has checked
	// that every one is inside the cache.
	return c.Cache.Path(entry)
}
