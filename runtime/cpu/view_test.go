package cpu

import (
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestView: a view is the same values in another shape (a write through
// one is read through the other), and a shape of another size is refused.
func TestView(t *testing.T) {
	b := New(1)
	x, err := b.NewTensor(4, 6)
	if err != nil {
		t.Fatal(err)
	}
	v, err := backend.View(b, x, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	if v.Rows() != 8 || v.Cols() != 3 {
		t.Fatalf("view is %d×%d", v.Rows(), v.Cols())
	}
	x.(*Tensor).Row(1)[0] = 7 // element 6: row 2 of the view
	if got := v.(*Tensor).Row(2)[0]; got != 7 {
		t.Errorf("view's row 2 starts with %g, want 7", got)
	}
	if _, err := backend.View(b, x, 5, 5); err == nil {
		t.Error("a 4×6 tensor viewed as 5×5")
	}
}
