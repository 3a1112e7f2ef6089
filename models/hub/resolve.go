package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/models/gguf"
)

// remote is one file a pull downloads.
type remote struct {
	name  string // the file's path in its repository, or the URL's path
	url   string
	local string // slash-separated path under the cache directory
}

// plan is what a reference resolves to.
type plan struct {
	repo  string
	files []remote // the first is the one to open; the others are its shards
	note  string   // how the file was chosen, when the reference did not say
}

// resolve turns a reference into the files to download, asking the Hub for
// the repository's listing when a quant tag (or its absence) must pick one.
func (c *Client) resolve(ctx context.Context, r Ref) (plan, error) {
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		if err != nil {
			return plan{}, err
		}
		p := urlName(u)
		if err := checkPath(p); err != nil {
			return plan{}, fmt.Errorf("%s: %v", r, err)
		}
		var files []remote
		for _, name := range shardNames(p, nil) {
			v := *u
			v.Path = "/" + name
			v.RawPath = ""
			files = append(files, remote{name: name, url: v.String(), local: urlLocal(u, name)})
		}
		return plan{files: files}, nil
	}
	pl := plan{repo: r.Repo}
	file := r.File
	var listing []string
	if file == "" {
		var err error
		if listing, err = c.listFiles(ctx, r.Repo); err != nil {
			return plan{}, err
		}
		if file, pl.note, err = pick(listing, r.Quant); err != nil {
			return plan{}, fmt.Errorf("%s: %v", r, err)
		}
	}
	if err := checkPath(file); err != nil {
		return plan{}, fmt.Errorf("%s: %v", r, err)
	}
	names := shardNames(file, listing)
	if names == nil {
		return plan{}, fmt.Errorf("%s: %s is a shard but the repository lacks some of the others", r, file)
	}
	for _, name := range names {
		pl.files = append(pl.files, remote{name: name, url: c.fileURL(r.Repo, name), local: hubLocal(r.Repo, name)})
	}
	return pl, nil
}

// fileURL is where the Hub serves a file of the main branch; it answers
// with a redirect to its CDN for large (LFS) files.
func (c *Client) fileURL(repo, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return c.endpoint() + "/" + repo + "/resolve/main/" + strings.Join(segs, "/")
}

// listFiles asks the Hub which files a repository holds.
func (c *Client) listFiles(ctx context.Context, repo string) ([]string, error) {
	u := c.endpoint() + "/api/models/" + repo
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	resp, err := c.do(c.httpClient(), req)
	if err != nil {
		return nil, fmt.Errorf("listing hf.co/%s: %w", repo, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing hf.co/%s: %w", repo, statusError(resp, c.Token != ""))
	}
	var info struct {
		Siblings []struct {
			Name string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, fmt.Errorf("listing hf.co/%s: %v", repo, err)
	}
	names := make([]string, 0, len(info.Siblings))
	for _, s := range info.Siblings {
		names = append(names, s.Name)
	}
	return names, nil
}

// defaultQuants is the order in which a reference without a tag picks a
// file: Q4_K_M first, as llama.cpp's -hf and ollama do (the usual balance
// of size and quality), then other common 4- and 8-bit types, then full
// precision, which small test models such as stories260K only come in.
var defaultQuants = []string{"Q4_K_M", "Q4_0", "Q4_K_S", "Q5_K_M", "Q8_0", "Q6_K", "F16", "BF16", "F32"}

// pick chooses the GGUF file of a listing that a quant tag names; without
// a tag, the first of defaultQuants the repository has, else the first
// file by name. note says what was chosen when the tag did not say.
func pick(listing []string, quant string) (file, note string, err error) {
	var ggufs []string
	for _, name := range listing {
		base := strings.ToLower(path.Base(name))
		// Projector files of vision models are GGUFs too, but not the model.
		if strings.HasSuffix(base, ".gguf") && !strings.HasPrefix(base, "mmproj") && shardIndex(name) <= 1 {
			ggufs = append(ggufs, name)
		}
	}
	sort.Strings(ggufs)
	if len(ggufs) == 0 {
		return "", "", fmt.Errorf("the repository has no GGUF file")
	}
	if quant != "" {
		m := matching(ggufs, quant)
		switch len(m) {
		case 1:
			return m[0], "", nil
		case 0:
			return "", "", fmt.Errorf("no GGUF file matches :%s; the repository has %s", quant, strings.Join(ggufs, ", "))
		}
		return "", "", fmt.Errorf(":%s matches %d files (%s); name one with OWNER/REPO/FILE.gguf", quant, len(m), strings.Join(m, ", "))
	}
	file = ggufs[0]
	for _, q := range defaultQuants {
		if m := matching(ggufs, q); len(m) > 0 {
			file = m[0]
			break
		}
	}
	note = fmt.Sprintf("no quant tag: picked %s", file)
	if len(ggufs) > 1 {
		note += fmt.Sprintf(" of %d GGUF files (add :TAG to choose another)", len(ggufs))
	}
	return file, note, nil
}

// matching returns the files whose names hold the tag as a whole word
// (Q4_K does not match Q4_K_M); when none does, those that hold it at all.
func matching(files []string, quant string) []string {
	q := strings.ToLower(quant)
	var whole, part []string
	for _, f := range files {
		name := strings.ToLower(f)
		found, exact := false, false
		for i := 0; ; {
			j := strings.Index(name[i:], q)
			if j < 0 {
				break
			}
			found = true
			start, end := i+j, i+j+len(q)
			if (start == 0 || !word(name[start-1])) && (end == len(name) || !word(name[end]) && name[end] != '_') {
				exact = true
			}
			i = start + 1
		}
		if exact {
			whole = append(whole, f)
		} else if found {
			part = append(part, f)
		}
	}
	if len(whole) > 0 {
		return whole
	}
	return part
}

func word(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// shardIndex is a split file's 1-based index, or 0 for a whole file.
func shardIndex(name string) int {
	if _, no, _, ok := gguf.ParseSplitName(name); ok {
		return no + 1
	}
	return 0
}

// shardNames returns every file of the model that name belongs to, the
// first shard first: name itself unless it is one of split files. Given a
// listing, it returns nil when a shard is missing from it.
func shardNames(name string, listing []string) []string {
	prefix, _, n, ok := gguf.ParseSplitName(name)
	if !ok {
		return []string{name}
	}
	have := map[string]bool{}
	for _, f := range listing {
		have[f] = true
	}
	names := make([]string, n)
	for i := range n {
		names[i] = gguf.SplitName(prefix, i, n)
		if listing != nil && !have[names[i]] {
			return nil
		}
	}
	return names
}
