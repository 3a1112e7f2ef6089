package hub

import (
	"fmt"
	"net/url"
	"strings"
)

// A Ref names a model to pull. It is one of three shapes:
//
//	hf.co/OWNER/REPO:QUANT     a repository on the Hub; QUANT picks one of its GGUF files
//	hf.co/OWNER/REPO/FILE.gguf one file of a repository (the hf.co/ prefix is optional)
//	https://host/path.gguf     any URL
//
// The first shape is what llama.cpp's -hf and ollama's hf.co/ names accept,
// so a user can paste a reference from either.
type Ref struct {
	// Repo is OWNER/REPO on the Hub; empty for a URL.
	Repo string
	// File is the file's path inside Repo; empty when Quant (or the
	// default choice) picks it from the repository's listing.
	File string
	// Quant is the quantization tag after the colon, such as Q4_K_M,
	// upper-cased; it matches file names case-insensitively.
	Quant string
	// URL is set, and the rest empty, for a plain URL.
	URL string
}

// String is the canonical form, which is also the key of the cache's index.
func (r Ref) String() string {
	switch {
	case r.URL != "":
		return r.URL
	case r.File != "":
		return "hf.co/" + r.Repo + "/" + r.File
	case r.Quant != "":
		return "hf.co/" + r.Repo + ":" + r.Quant
	}
	return "hf.co/" + r.Repo
}

// Parse reads a reference. It rejects anything that looks like a local path
// (absolute, ./, ../, ~, a backslash), so a caller can try a value as a path
// first and as a reference second without a file name being mistaken for a
// repository.
func Parse(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") {
		u, err := url.Parse(s)
		if err != nil {
			return Ref{}, fmt.Errorf("model reference %q: %v", s, err)
		}
		if u.Host == "" || u.Path == "" || u.Path == "/" {
			return Ref{}, fmt.Errorf("model reference %q: the URL names no file", s)
		}
		u.Fragment = ""
		return Ref{URL: u.String()}, nil
	}
	if s == "" || strings.ContainsAny(s, `\`) || strings.HasPrefix(s, "/") ||
		strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") {
		return Ref{}, fmt.Errorf("%q is not a model reference (want hf.co/OWNER/REPO:QUANT, OWNER/REPO/FILE.gguf or an https URL)", s)
	}
	hub := false
	for _, p := range []string{"hf.co/", "huggingface.co/"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			s, hub = rest, true
			break
		}
	}
	parts := strings.Split(s, "/")
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%q is not a model reference: %s (want hf.co/OWNER/REPO:QUANT, OWNER/REPO/FILE.gguf or an https URL)", s, why)
	}
	if len(parts) < 2 {
		return bad("no OWNER/REPO")
	}
	var r Ref
	repo, quant, tagged := strings.Cut(parts[1], ":")
	if tagged {
		if len(parts) != 2 {
			return bad("a :QUANT tag goes after the repository, not a file")
		}
		if !validName(quant) {
			return bad(fmt.Sprintf("quant tag %q", quant))
		}
		r.Quant = strings.ToUpper(quant)
	}
	if !validName(parts[0]) || !validName(repo) {
		return bad("OWNER and REPO are letters, digits, '-', '_' and '.'")
	}
	r.Repo = parts[0] + "/" + repo
	if len(parts) == 2 {
		// Without hf.co/, OWNER/REPO alone would shadow a folder of that
		// name; the tag or the prefix says a repository is meant.
		if !hub && !tagged {
			return bad("say hf.co/OWNER/REPO, or add :QUANT or a file")
		}
		return r, nil
	}
	file := strings.Join(parts[2:], "/")
	if err := checkPath(file); err != nil {
		return bad(err.Error())
	}
	if !hub && !strings.HasSuffix(strings.ToLower(file), ".gguf") {
		return bad("a file reference without hf.co/ must end in .gguf")
	}
	r.File = file
	return r, nil
}

// validName reports whether s is a Hub owner or repository name, or a tag.
func validName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkPath rejects a relative slash-separated path that could escape the
// cache directory it is joined to: file names come from the user and from
// the Hub's listing, and neither is trusted with the file system.
func checkPath(p string) error {
	if p == "" {
		return fmt.Errorf("empty file name")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\:\x00") {
			return fmt.Errorf("file name %q", p)
		}
		for _, c := range seg {
			if c < 0x20 || c == 0x7f {
				return fmt.Errorf("file name %q", p)
			}
		}
	}
	return nil
}
