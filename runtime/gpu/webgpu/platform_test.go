package webgpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The device's own logic (device.go, bindgroup.go, recorder.go) over a
// platform that keeps buffers in host memory and logs its calls: what both
// real platforms rely on, checked without a GPU, including the paths only
// a browser takes (errors it reports on its own).

type hostBuffer struct {
	label    string
	data     []byte
	released bool
}

type hostPlatform struct {
	lostErr   error
	reports   []string // what reported returns next
	readErr   error    // what read fails with, if set
	buffers   []*hostBuffer
	staging   []*hostBuffer // the staging buffers made, in order
	submitted int
	log       []string // the encoder's calls
	closed    [][]string
}

func (h *hostPlatform) lost() error { return h.lostErr }

func (h *hostPlatform) reported() error {
	if len(h.reports) == 0 {
		return nil
	}
	err := fmt.Errorf("gpu: reported: %s", strings.Join(h.reports, "; "))
	h.reports = nil
	return err
}

func (h *hostPlatform) newBuffer(label string, alloc int64, _ Usage) (*hostBuffer, error) {
	b := &hostBuffer{label: label, data: make([]byte, alloc)}
	h.buffers = append(h.buffers, b)
	return b, nil
}

func (h *hostPlatform) newStaging(size int64) (*hostBuffer, error) {
	b := &hostBuffer{label: "staging", data: make([]byte, size)}
	h.staging = append(h.staging, b)
	return b, nil
}

func (h *hostPlatform) releaseBuffer(b *hostBuffer) {
	if b.released {
		panic("buffer " + b.label + " released twice")
	}
	b.released = true
}

func (h *hostPlatform) write(dst *hostBuffer, offset int64, data []byte) error {
	copy(dst.data[offset:], data)
	return nil
}

func (h *hostPlatform) read(src *hostBuffer, offset int64, staging *hostBuffer, n int64, out []byte) error {
	if h.readErr != nil {
		return h.readErr
	}
	copy(staging.data[:n], src.data[offset:])
	copy(out, staging.data)
	return nil
}

func (h *hostPlatform) newLayout(key string, _ []Access) (string, error) { return key, nil }

func (h *hostPlatform) newBindGroup(label string, _ string, entries []groupEntry[*hostBuffer]) (string, error) {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = fmt.Sprintf("%d:%s@%d+%d", e.binding, e.buffer.label, e.offset, e.size)
	}
	return label + "(" + strings.Join(names, " ") + ")", nil
}

func (h *hostPlatform) releaseBindGroup(string) {}

func (h *hostPlatform) newPipeline(k Kernel, _ string, _ string) (string, error) { return k.Name, nil }

func (h *hostPlatform) submit(ops []command[*hostBuffer, string, string, string]) error {
	h.submitted++
	return encode(h, ops)
}

func (h *hostPlatform) close(pipelines []string, layouts []string) {
	slices.Sort(pipelines)
	slices.Sort(layouts)
	h.closed = append(h.closed, pipelines, layouts)
}

// hostPlatform is its own commandEncoder; copy really copies.
func (h *hostPlatform) copy(src *hostBuffer, srcOff int64, dst *hostBuffer, dstOff int64, size int64) error {
	h.log = append(h.log, "copy "+src.label+" "+dst.label)
	copy(dst.data[dstOff:dstOff+size], src.data[srcOff:])
	return nil
}
func (h *hostPlatform) beginPass()              { h.log = append(h.log, "begin") }
func (h *hostPlatform) setPipeline(p string)    { h.log = append(h.log, "pipeline "+p) }
func (h *hostPlatform) setBindGroup(g string)   { h.log = append(h.log, "group "+g) }
func (h *hostPlatform) dispatch(x, y, z uint32) { h.log = append(h.log, fmt.Sprintf("dispatch %d", x)) }
func (h *hostPlatform) endPass() error          { h.log = append(h.log, "end"); return nil }

func newHostDevice() (*device[*hostBuffer, string, string, string], *hostPlatform) {
	h := &hostPlatform{}
	info := Info{
		MaxBufferSize: 1 << 30, MaxStorageBufferBindingSize: 1 << 30,
		MaxComputeWorkgroupsPerDimension: 65535, MinStorageBufferOffsetAlignment: 256,
		MaxStorageBuffersPerShaderStage: 8,
	}
	return newDevice(h, info, 64<<10, 256), h
}

func mustBuffer(t *testing.T, d Device, label string, size int64) Buffer {
	t.Helper()
	b, err := d.NewBuffer(label, size, Storage|CopySrc|CopyDst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeviceStaging checks the read-back bookkeeping: small reads share
// one kept staging buffer, grown to a power of two when a read needs more,
// and a read bigger than stagingKeep gets its own, released after it.
func TestDeviceStaging(t *testing.T) {
	d, h := newHostDevice()
	big := mustBuffer(t, d, "big", stagingKeep+8)
	data := make([]byte, stagingKeep+8)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	if err := d.Write(big, 0, data); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		offset, size int64
		made         int  // staging buffers made so far
		lastSize     int  // the size of the last one
		lastKept     bool // whether the last one is still alive
	}{
		{0, 4, 1, 4096, true},
		{8, 4093, 1, 4096, true}, // 4096 after rounding up to a word: fits
		{4, 5000, 2, 8192, true}, // grows to the next power of two
		{0, 3, 2, 8192, true},
		{0, stagingKeep + 8, 3, stagingKeep + 8, false}, // one-off, released
		{12, 100, 3, stagingKeep + 8, false},            // the kept 8 KiB one again
	}
	for _, tc := range tests {
		got, err := d.Read(big, tc.offset, tc.size)
		if err != nil {
			t.Fatalf("Read(%d, %d): %v", tc.offset, tc.size, err)
		}
		if want := data[tc.offset : tc.offset+tc.size]; !slices.Equal(got, want) {
			t.Errorf("Read(%d, %d) returned other bytes than written", tc.offset, tc.size)
		}
		last := h.staging[len(h.staging)-1]
		if len(h.staging) != tc.made || len(last.data) != tc.lastSize || last.released == tc.lastKept {
			t.Errorf("after Read(%d, %d): %d staging buffers, the last of %d bytes, released %v; want %d, %d, %v",
				tc.offset, tc.size, len(h.staging), len(last.data), last.released, tc.made, tc.lastSize, !tc.lastKept)
		}
	}
	if !h.staging[0].released {
		t.Error("the 4 KiB staging buffer was not released when an 8 KiB one replaced it")
	}
	d.Close()
	if !h.staging[1].released {
		t.Error("Close did not release the kept staging buffer")
	}
}

// TestDeviceErrors checks the errors a platform's state turns into: a
// report reaches the next Submit or Read, once; a read that fails on a lost
// device returns the loss; any other failure names the buffer.
func TestDeviceErrors(t *testing.T) {
	d, h := newHostDevice()
	b := mustBuffer(t, d, "x", 16)

	h.reports = []string{"bad thing"}
	if err := d.Recorder().Submit(); err == nil || !strings.Contains(err.Error(), "bad thing") {
		t.Errorf("Submit after a report: %v, want the report", err)
	}
	if err := d.Recorder().Submit(); err != nil {
		t.Errorf("second Submit: %v, want the report given once", err)
	}
	h.reports = []string{"worse thing"}
	if _, err := d.Read(b, 0, 4); err == nil || !strings.Contains(err.Error(), "worse thing") {
		t.Errorf("Read after a report: %v, want the report", err)
	}

	h.readErr = errors.New("mapping failed")
	if _, err := d.Read(b, 0, 4); err == nil || err.Error() != `gpu: reading buffer "x": mapping failed` {
		t.Errorf("failed Read: %v", err)
	}
	h.lostErr = fmt.Errorf("%w (gone)", ErrDeviceLost)
	if _, err := d.Read(b, 0, 4); !errors.Is(err, ErrDeviceLost) || err.Error() != h.lostErr.Error() {
		t.Errorf("Read on a lost device: %v, want %v", err, h.lostErr)
	}
	if _, err := d.NewBuffer("y", 4, Storage); !errors.Is(err, ErrDeviceLost) {
		t.Errorf("NewBuffer on a lost device: %v, want the loss", err)
	}
}

// TestDeviceRecorderEncode checks what Submit hands the platform's encoder:
// dispatches share a pass and set only what changed, a copy ends the pass.
func TestDeviceRecorderEncode(t *testing.T) {
	d, h := newHostDevice()
	src, dst := mustBuffer(t, d, "src", 1024), mustBuffer(t, d, "dst", 1024)
	if err := d.Write(src, 0, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	kernel := func(name string) Pipeline {
		p, err := d.Pipeline(Kernel{Name: name, Source: "@compute @workgroup_size(1) fn main() {}", Bindings: []Access{ReadWrite, ReadOnly}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := kernel("a"), kernel("b")
	group := func(p Pipeline, x, y Buffer) BindGroup {
		g, err := d.BindGroup(p, []Binding{{Buffer: x}, {Buffer: y, Offset: 256, Size: 16}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1, g2 := group(a, src, dst), group(b, dst, src)

	r := d.Recorder()
	r.Dispatch(a, g1, 1, 1, 1)
	r.Dispatch(a, g1, 2, 1, 1)
	r.Dispatch(b, g1, 3, 1, 1) // bind groups serve any kernel of their layout
	r.Copy(src, 0, dst, 4, 8)
	r.Dispatch(b, g2, 4, 1, 1)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"begin", "pipeline a", "group a(0:src@0+1024 1:dst@256+16)", "dispatch 1", "dispatch 2",
		"pipeline b", "dispatch 3", "end",
		"copy src dst",
		"begin", "pipeline b", "group b(0:dst@0+1024 1:src@256+16)", "dispatch 4", "end",
	}
	if !slices.Equal(h.log, want) {
		t.Errorf("encoded\n  %q\nwant\n  %q", h.log, want)
	}
	if got, err := d.Read(dst, 4, 8); err != nil || !slices.Equal(got, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("the copy gave %v, %v", got, err)
	}
	if r.Dispatches() != 4 || h.submitted != 1 {
		t.Errorf("%d dispatches in %d submissions, want 4 in 1", r.Dispatches(), h.submitted)
	}

	// A released bind group fails Submit before the platform sees it.
	r.Dispatch(b, g2, 1, 1, 1)
	g2.Release()
	if err := r.Submit(); err == nil || !strings.Contains(err.Error(), "bind group after Release") || h.submitted != 1 {
		t.Errorf("Submit with a released bind group: %v after %d submissions", err, h.submitted)
	}

	d.Close()
	d.Close()
	if want := [][]string{{"a", "b"}, {LayoutKey([]Access{ReadWrite, ReadOnly})}}; !slices.EqualFunc(h.closed, want, slices.Equal) {
		t.Errorf("Close handed the platform %q, want %q once", h.closed, want)
	}
	if _, err := d.Pipeline(Kernel{Name: "c", Source: "x", Bindings: []Access{ReadOnly}}); !errors.Is(err, errClosed) {
		t.Errorf("Pipeline after Close: %v, want %v", err, errClosed)
	}
}

// TestDeviceSubBuffer checks that a sub-buffer is its range of its base in
// everything the platform sees (bindings, writes, reads, copies), that the
// checks WebGPU makes of one buffer apply to the sub-buffers of one base,
// and that releasing the base ends them.
func TestDeviceSubBuffer(t *testing.T) {
	d, h := newHostDevice()
	base := mustBuffer(t, d, "base", 4096)
	other := mustBuffer(t, d, "other", 1024)
	sub := func(label string, off, size int64) Buffer {
		t.Helper()
		s, err := d.SubBuffer(base, label, off, size)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	w1, w2 := sub("w1", 256, 10), sub("w2", 1024, 512)
	if w1.Size() != 10 {
		t.Errorf("sub-buffer of 10 bytes has size %d", w1.Size())
	}
	for _, tc := range []struct {
		off, size int64
		of        Buffer
		want      string
	}{
		{100, 16, base, "offsets multiples of 256"},
		{4096, 4, base, "at offset 4096"},
		{3840, 260, base, "260 bytes"},
		{0, 0, base, "0 bytes"},
		{0, 4, w1, "itself a sub-buffer"},
	} {
		if _, err := d.SubBuffer(tc.of, "bad", tc.off, tc.size); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SubBuffer(%d, %d): %v, want an error saying %q", tc.off, tc.size, err, tc.want)
		}
	}

	// Writes and reads land in the base at the sub-buffer's offset; a
	// ragged write pads to its word.
	if err := d.Write(w1, 4, []byte{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	if got := h.buffers[0].data[260:268]; !slices.Equal(got, []byte{1, 2, 3, 4, 5, 6, 0, 0}) {
		t.Errorf("base bytes 260-267 after the write: %v", got)
	}
	if got, err := d.Read(w1, 4, 6); err != nil || !slices.Equal(got, []byte{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Read of the sub-buffer: %v, %v", got, err)
	}
	if err := d.Write(w1, 8, make([]byte, 8)); err == nil {
		t.Error("a write past the sub-buffer's end was taken")
	}

	// Bindings are at the sub-buffer's offset, sized to it.
	p, err := d.Pipeline(Kernel{Name: "k", Source: "x", Bindings: []Access{ReadWrite, ReadOnly, ReadOnly}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := d.BindGroup(p, []Binding{{Buffer: other}, {Buffer: w1}, {Buffer: w2, Offset: 256}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.BindGroup(p, []Binding{{Buffer: w2}, {Buffer: w1}, {Buffer: other}}); err == nil ||
		!strings.Contains(err.Error(), "one buffer, writable in one") {
		t.Errorf("a base bound writable and read-only in one bind group: %v", err)
	}
	r := d.Recorder()
	r.Dispatch(p, g, 1, 1, 1)
	r.Copy(w2, 0, other, 0, 16)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	want := []string{"begin", "pipeline k", "group k(0:other@0+1024 1:base@256+12 2:base@1280+256)", "dispatch 1", "end", "copy base other"}
	if !slices.Equal(h.log, want) {
		t.Errorf("encoded\n  %q\nwant\n  %q", h.log, want)
	}
	r.Copy(w1, 0, w2, 0, 4)
	if err := r.Submit(); err == nil || !strings.Contains(err.Error(), "same platform buffer") {
		t.Errorf("a copy between sub-buffers of one base: %v", err)
	}

	// Releasing a sub-buffer frees nothing; releasing the base ends every
	// sub-buffer, in new bind groups and in ones made before.
	w1.Release()
	if h.buffers[0].released {
		t.Error("releasing a sub-buffer released its base")
	}
	if _, err := d.BindGroup(p, []Binding{{Buffer: other}, {Buffer: w1}, {Buffer: w2}}); err == nil {
		t.Error("a released sub-buffer was bound")
	}
	g2, err := d.BindGroup(p, []Binding{{Buffer: other}, {Buffer: w2}, {Buffer: w2}})
	if err != nil {
		t.Fatal(err)
	}
	r.Dispatch(p, g2, 1, 1, 1)
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	base.Release()
	r.Dispatch(p, g2, 1, 1, 1)
	if err := r.Submit(); err == nil || !strings.Contains(err.Error(), `buffer "w2" after Release`) {
		t.Errorf("a dispatch binding a sub-buffer of a released base: %v", err)
	}
	if _, err := d.Read(w2, 0, 4); err == nil {
		t.Error("a sub-buffer of a released base was read")
	}
}
