package gguf

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

func TestSplitNames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prefix    string
		no, count int
		ok        bool
	}{
		{"/m/Qwen3-8B-Q4_K_M-00001-of-00003.gguf", "/m/Qwen3-8B-Q4_K_M", 0, 3, true},
		{"x-00003-of-00003.gguf", "x", 2, 3, true},
		{"x-00004-of-00003.gguf", "", 0, 0, false},
		{"x-00000-of-00003.gguf", "", 0, 0, false},
		{"x-0001-of-0003.gguf", "", 0, 0, false},
		{"x.gguf", "", 0, 0, false},
	} {
		prefix, no, count, ok := ParseSplitName(tc.name)
		if prefix != tc.prefix || no != tc.no || count != tc.count || ok != tc.ok {
			t.Errorf("ParseSplitName(%q) = %q, %d, %d, %v; want %q, %d, %d, %v", tc.name, prefix, no, count, ok, tc.prefix, tc.no, tc.count, tc.ok)
		}
		if ok && SplitName(prefix, no, count) != tc.name {
			t.Errorf("SplitName(%q, %d, %d) = %q, want %q", prefix, no, count, SplitName(prefix, no, count), tc.name)
		}
	}
}

// TestWriteSplit: the parts of a split file hold its metadata (in the
// first) and its tensors, byte for byte, each part placed by its keys.
func TestWriteSplit(t *testing.T) {
	whole, err := Read(bytes.NewReader(sampleFile(t)), int64(len(sampleFile(t))))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, len(whole.Tensors)} {
		bufs := make([]bytes.Buffer, n)
		ws := make([]io.Writer, n)
		for i := range bufs {
			ws[i] = &bufs[i]
		}
		if err := whole.WriteSplit(ws); err != nil {
			t.Fatalf("%d parts: %v", n, err)
		}
		var names []string
		for i := range bufs {
			p, err := Read(bytes.NewReader(bufs[i].Bytes()), int64(bufs[i].Len()))
			if err != nil {
				t.Fatalf("part %d of %d: %v", i+1, n, err)
			}
			s, err := p.Split()
			if err != nil || s != (Split{No: i, Count: n, Tensors: len(whole.Tensors)}) || len(p.Tensors) == 0 {
				t.Errorf("part %d of %d: %+v, %v, %d tensors", i+1, n, s, err, len(p.Tensors))
			}
			if _, ok := p.Lookup("general.architecture"); ok != (i == 0) {
				t.Errorf("part %d of %d: general.architecture present %v; only the first part has metadata", i+1, n, ok)
			}
			for j := range p.Tensors {
				got, err := p.ReadTensor(&p.Tensors[j])
				if err != nil {
					t.Fatal(err)
				}
				wt, _ := whole.Tensor(p.Tensors[j].Name)
				want, _ := whole.ReadTensor(wt)
				if !bytes.Equal(got, want) {
					t.Errorf("part %d of %d: tensor %s differs", i+1, n, wt.Name)
				}
				names = append(names, wt.Name)
			}
		}
		var all []string
		for _, ti := range whole.Tensors {
			all = append(all, ti.Name)
		}
		if !slices.Equal(names, all) {
			t.Errorf("%d parts hold %v, want %v in order", n, names, all)
		}
	}
	if err := whole.WriteSplit(make([]io.Writer, len(whole.Tensors)+1)); err == nil {
		t.Error("more parts than tensors: no error")
	}
}

// TestSplitKeysChecked: split keys that contradict each other or the
// file are errors.
func TestSplitKeysChecked(t *testing.T) {
	for name, kv := range map[string][]KV{
		"no without count":  {{KeySplitNo, Uint16Value(0)}},
		"count without no":  {{KeySplitCount, Uint16Value(2)}, {KeySplitTensors, Int32Value(9)}},
		"no past count":     {{KeySplitNo, Uint16Value(2)}, {KeySplitCount, Uint16Value(2)}, {KeySplitTensors, Int32Value(9)}},
		"fewer than held":   {{KeySplitNo, Uint16Value(0)}, {KeySplitCount, Uint16Value(2)}, {KeySplitTensors, Int32Value(0)}},
		"count of zero":     {{KeySplitNo, Uint16Value(0)}, {KeySplitCount, Uint16Value(0)}, {KeySplitTensors, Int32Value(9)}},
		"without tensors #": {{KeySplitNo, Uint16Value(0)}, {KeySplitCount, Uint16Value(2)}},
	} {
		var b bytes.Buffer
		if err := Write(&b, kv, sampleTensors(t)[:1]); err != nil {
			t.Fatal(err)
		}
		f, err := Read(bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := f.Split(); err == nil {
			t.Errorf("%s: %+v, no error", name, s)
		}
	}
}
