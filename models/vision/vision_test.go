package vision_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/vision"
)

// TestReadIdefics3: a projector written with llama.cpp's keys and tensor
// names reads back as the tower it was written from (its width from
// mm.model.fc), and a preprocessing size that asks for more tiles than any
// tower cuts is refused.
func TestReadIdefics3(t *testing.T) {
	write := func(c vision.Config) []byte {
		var b bytes.Buffer
		if err := synth.WriteProjector(&b, c, dtype.F32, 1); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	c, err := synth.ProjectorShape("tiny-idefics3", 64)
	if err != nil {
		t.Fatal(err)
	}
	raw := write(c)
	m, err := vision.OpenReader(bytes.NewReader(raw), int64(len(raw)), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Config, c) {
		t.Errorf("read %+v, wrote %+v", m.Config, c)
	}
	if _, err := m.Tensor(vision.FC, 64, 4*32); err != nil {
		t.Error(err)
	}
	m.Close()

	bad := c
	bad.LongestEdge = 4096 // 128 tiles of 32 a side
	raw = write(bad)
	if _, err := vision.OpenReader(bytes.NewReader(raw), int64(len(raw)), "hostile"); err == nil || !strings.Contains(err.Error(), "preprocessing size") {
		t.Errorf("a preprocessing size of 4096 for tiles of 32: %v", err)
	}
}
