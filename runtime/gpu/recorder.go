package gpu

import "fmt"

// The Go side of a Recorder, shared by the native and browser devices,
// which differ only in how Submit encodes the commands: each command is
// checked as it is recorded (wgpu-native treats an invalid submission as
// fatal, a browser only warns on the console), and the commands wait on the
// Go side for Submit, so that recording takes no lock and holds no device
// objects.

// devPipeline, devGroup and devBuffer are what the recorder needs of a
// device's own pipeline, bind group and buffer types.
type devPipeline interface {
	comparable
	owner() any // the device
	kernel() string
	layoutKey() string
}

type devGroup[B devBuffer] interface {
	comparable
	owner() any
	layoutKey() string
	isReleased() bool
	bound() []B
}

type devBuffer interface {
	comparable
	owner() any
	isReleased() bool
	checkRange(need Usage, offset, size int64) error
	String() string
}

// command is a dispatch (pipeline set) or a copy.
type command[P devPipeline, G devGroup[B], B devBuffer] struct {
	pipeline P
	group    G
	x, y, z  uint32

	src, dst       B
	srcOff, dstOff int64
	size           int64
}

// recording collects the commands of one device (dev) until Submit.
type recording[P devPipeline, G devGroup[B], B devBuffer] struct {
	dev        any
	maxGroups  uint32 // the device's workgroups per dimension
	ops        []command[P, G, B]
	dispatches int
	err        error // the first invalid command since the last Submit
}

func (r *recording[P, G, B]) Dispatches() int { return r.dispatches }

func (r *recording[P, G, B]) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("gpu: "+format, args...)
	}
}

func (r *recording[P, G, B]) Dispatch(p Pipeline, g BindGroup, x, y, z uint32) {
	var none P
	pl, ok := p.(P)
	if !ok || pl == none || pl.owner() != r.dev {
		r.fail("dispatch: %T is not a pipeline of this device", p)
		return
	}
	var noGroup G
	bg, ok := g.(G)
	if !ok || bg == noGroup || bg.owner() != r.dev {
		r.fail("dispatch of kernel %q: %T is not a bind group of this device", pl.kernel(), g)
		return
	}
	if bg.layoutKey() != pl.layoutKey() {
		r.fail("dispatch of kernel %q: its bindings are %q, the bind group's %q",
			pl.kernel(), pl.layoutKey(), bg.layoutKey())
		return
	}
	if limit := r.maxGroups; x > limit || y > limit || z > limit {
		r.fail("dispatch of kernel %q: %d×%d×%d workgroups exceed the device's %d per dimension",
			pl.kernel(), x, y, z, limit)
		return
	}
	r.ops = append(r.ops, command[P, G, B]{pipeline: pl, group: bg, x: x, y: y, z: z})
	r.dispatches++
}

func (r *recording[P, G, B]) Copy(src Buffer, srcOff int64, dst Buffer, dstOff int64, size int64) {
	var none B
	s, ok1 := src.(B)
	t, ok2 := dst.(B)
	switch {
	case !ok1 || !ok2 || s == none || t == none || s.owner() != r.dev || t.owner() != r.dev:
		r.fail("copy: %T to %T are not buffers of this device", src, dst)
	case s == t:
		r.fail("copy: source and destination are the same %v", s)
	case size%4 != 0:
		r.fail("copy: size %d is not a multiple of 4", size)
	default:
		if err := s.checkRange(CopySrc, srcOff, size); err != nil {
			r.fail("copy: %v", err)
		} else if err := t.checkRange(CopyDst, dstOff, size); err != nil {
			r.fail("copy: %v", err)
		} else {
			r.ops = append(r.ops, command[P, G, B]{src: s, dst: t, srcOff: srcOff, dstOff: dstOff, size: size})
		}
	}
}

// take returns the commands since the last take, or the first invalid
// one's error, and starts over.
func (r *recording[P, G, B]) take() ([]command[P, G, B], error) {
	ops, err := r.ops, r.err
	r.ops, r.err = nil, nil
	return ops, err
}

// checkLive rejects commands that use a released buffer or bind group.
// Callers hold the device's lock.
func checkLive[P devPipeline, G devGroup[B], B devBuffer](ops []command[P, G, B]) error {
	var none P
	for _, o := range ops {
		if o.pipeline == none {
			for _, b := range []B{o.src, o.dst} {
				if b.isReleased() {
					return fmt.Errorf("gpu: copy uses %v after Release", b)
				}
			}
			continue
		}
		if o.group.isReleased() {
			return fmt.Errorf("gpu: dispatch of kernel %q uses a bind group after Release", o.pipeline.kernel())
		}
		for _, b := range o.group.bound() {
			if b.isReleased() {
				return fmt.Errorf("gpu: dispatch of kernel %q uses %v after Release", o.pipeline.kernel(), b)
			}
		}
	}
	return nil
}
