package gguf

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// A model too big for one file is split by llama.cpp's gguf-split into
// parts named NAME-00001-of-00003.gguf. Each part is a GGUF file of its
// own holding some of the tensors, with three keys that place it: split.no
// (its 0-based index), split.count and split.tensors.count (the tensors in
// all parts). The first part carries the model's metadata; the others
// carry only those keys.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

var splitNameRE = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// SplitName is the file name of part no (0-based) of a model split into
// count parts whose names start with prefix, as gguf-split names them.
func SplitName(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no+1, count)
}

// ParseSplitName reads a part's file name (or path): its prefix, 0-based
// index and the number of parts. ok is false for any other name.
func ParseSplitName(name string) (prefix string, no, count int, ok bool) {
	m := splitNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", 0, 0, false
	}
	n, _ := strconv.Atoi(m[2])
	c, _ := strconv.Atoi(m[3])
	if n < 1 || c < 1 || n > c {
		return "", 0, 0, false
	}
	return m[1], n - 1, c, true
}

// Split is where a file sits in a split model: part No of Count, with
// Tensors tensors in all. A whole file is part 0 of 1.
type Split struct {
	No, Count, Tensors int
}

// Split reads the file's split keys, checking them against each other and
// against the file's own tensors.
func (f *File) Split() (Split, error) {
	s := Split{Count: 1, Tensors: len(f.Tensors)}
	count, hasCount := f.Uint(KeySplitCount)
	if !hasCount {
		if _, ok := f.Lookup(KeySplitNo); ok {
			return s, fmt.Errorf("gguf: %s without %s", KeySplitNo, KeySplitCount)
		}
		return s, nil
	}
	no, ok := f.Uint(KeySplitNo)
	if !ok {
		return s, fmt.Errorf("gguf: %s without %s", KeySplitCount, KeySplitNo)
	}
	tensors, ok := f.Uint(KeySplitTensors)
	if !ok {
		return s, fmt.Errorf("gguf: %s without %s", KeySplitCount, KeySplitTensors)
	}
	const maxParts = 99999 // five digits in the file names
	if count < 1 || count > maxParts || no >= count || tensors < uint64(len(f.Tensors)) || tensors > 1<<31 {
		return s, fmt.Errorf("gguf: split keys: part %d of %d, %d tensors in all, %d in this part", no, count, tensors, len(f.Tensors))
	}
	return Split{No: int(no), Count: int(count), Tensors: int(tensors)}, nil
}

// WriteSplit writes a model as len(parts) files, as gguf-split does: the
// first holds kv, every one the split keys and its share of the tensors,
// in order, about as many bytes in each. With one writer it writes a whole
// file, without split keys.
func WriteSplit(parts []io.Writer, kv []KV, tensors []WriteTensor) error {
	n := len(parts)
	if n == 0 {
		return fmt.Errorf("gguf: WriteSplit without a writer")
	}
	if n == 1 {
		return Write(parts[0], kv, tensors)
	}
	if n > len(tensors) {
		return fmt.Errorf("gguf: %d tensors cannot fill %d parts", len(tensors), n)
	}
	var total int64
	for _, t := range tensors {
		total += int64(len(t.Data))
	}
	// Cut where the bytes so far pass each part's share, keeping at least
	// one tensor for every part still to come.
	start, done := 0, int64(0)
	for i, w := range parts {
		end := start + 1
		done += int64(len(tensors[start].Data))
		for end < len(tensors)-(n-1-i) && (i == n-1 || done+int64(len(tensors[end].Data)) <= total*int64(i+1)/int64(n)) {
			done += int64(len(tensors[end].Data))
			end++
		}
		if i == n-1 {
			end = len(tensors)
		}
		md := []KV{
			{KeySplitNo, Uint16Value(uint16(i))},
			{KeySplitCount, Uint16Value(uint16(n))},
			{KeySplitTensors, Int32Value(int32(len(tensors)))},
		}
		if i == 0 {
			md = append(append([]KV(nil), kv...), md...)
		}
		if err := Write(w, md, tensors[start:end]); err != nil {
			return fmt.Errorf("gguf: part %d of %d: %w", i+1, n, err)
		}
		start = end
	}
	return nil
}

// WriteSplit rewrites the whole file f as len(parts) parts (see the
// function WriteSplit), its metadata and tensors unchanged. It reads every
// tensor into memory first.
func (f *File) WriteSplit(parts []io.Writer) error {
	tensors := make([]WriteTensor, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		data, err := f.ReadTensor(t)
		if err != nil {
			return err
		}
		tensors[i] = WriteTensor{Name: t.Name, Dims: t.Dims, Type: t.Type, Data: data}
	}
	return WriteSplit(parts, f.KV, tensors)
}
