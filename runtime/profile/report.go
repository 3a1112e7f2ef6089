package profile

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// Report is where a decode token's time goes.
type Report struct {
	Steps int // decode steps timed
	// Kinds and Layers are per decode token, largest first (Layers in
	// order): -1 is what comes before the first layer, the last the head.
	Kinds  []Share
	Layers []Share
	Total  time.Duration // the sum of the ops' times, per token
	// Step is a decode step's time unprofiled (Backend.StepTime, or else
	// 1 / decode tok/s), and Outside
	// the share of it not spent in ops: 1 - Total/Step, or 0 when timing
	// each op alone costs more than the step (the syncs' own overhead).
	Step    time.Duration
	Outside float64
	// CopyGBps is the device's copy bandwidth, against which each matrix
	// product kind's bytes per second are set (Share.Fraction).
	CopyGBps float64
}

// Share is the time of one kind of op (or one layer) per token.
type Share struct {
	Name     string
	Layer    int
	Count    int // ops per token
	Time     time.Duration
	CPU      time.Duration // the process's CPU time (Op.CPU)
	Bytes    int64         // matrix products: bytes moved per token
	GBps     float64       // Bytes / Time
	Fraction float64       // GBps / copy bandwidth
}

// Summarize sums ops over steps decode steps, given the token's time
// unprofiled and the copy bandwidth.
func Summarize(ops []Op, steps int, step time.Duration, copyGBps float64) Report {
	r := Report{Steps: steps, Step: step, CopyGBps: copyGBps}
	if steps == 0 {
		return r
	}
	kinds, layers := map[string]*Share{}, map[int]*Share{}
	for _, o := range ops {
		k := kinds[o.Kind]
		if k == nil {
			k = &Share{Name: o.Kind}
			kinds[o.Kind] = k
		}
		l := layers[o.Layer]
		if l == nil {
			l = &Share{Layer: o.Layer}
			layers[o.Layer] = l
		}
		for _, s := range []*Share{k, l} {
			s.Count++
			s.Time += o.Time
			s.CPU += o.CPU
			s.Bytes += o.Bytes
		}
		r.Total += o.Time
	}
	per := func(s *Share) Share {
		out := *s
		out.Count = (s.Count + steps/2) / steps
		out.Time = s.Time / time.Duration(steps)
		out.CPU = s.CPU / time.Duration(steps)
		out.Bytes = s.Bytes / int64(steps)
		if out.Time > 0 && out.Bytes > 0 {
			out.GBps = float64(out.Bytes) / out.Time.Seconds() / 1e9
			if copyGBps > 0 {
				out.Fraction = out.GBps / copyGBps
			}
		}
		return out
	}
	for _, s := range kinds {
		r.Kinds = append(r.Kinds, per(s))
	}
	sort.Slice(r.Kinds, func(i, j int) bool { return r.Kinds[i].Time > r.Kinds[j].Time })
	for _, s := range layers {
		r.Layers = append(r.Layers, per(s))
	}
	sort.Slice(r.Layers, func(i, j int) bool { return r.Layers[i].Layer < r.Layers[j].Layer })
	r.Total /= time.Duration(steps)
	if step > 0 && r.Total < step {
		r.Outside = 1 - float64(r.Total)/float64(step)
	}
	return r
}

// Print writes the report as tables.
func (r Report) Print(w io.Writer) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Fprintf(w, "decode step       %.3f ms unprofiled; ops timed one by one add up to %.3f ms (%d steps)\n", ms(r.Step), ms(r.Total), r.Steps)
	if r.Total < r.Step {
		fmt.Fprintf(w, "outside kernels   %.0f%% of the step\n", 100*r.Outside)
	} else {
		fmt.Fprintf(w, "outside kernels   not measurable: a submission and read back per op cost more than the step's gaps\n")
	}
	fmt.Fprintf(w, "\n%-10s %6s %10s %7s %10s %12s %8s %9s\n", "op", "count", "ms/token", "share", "cpu ms", "bytes/token", "GB/s", "of copy")
	for _, k := range r.Kinds {
		share := 0.0
		if r.Total > 0 {
			share = float64(k.Time) / float64(r.Total)
		}
		fmt.Fprintf(w, "%-10s %6d %10.3f %6.1f%% %10.3f", k.Name, k.Count, ms(k.Time), 100*share, ms(k.CPU))
		if k.Bytes > 0 {
			fmt.Fprintf(w, " %12d %8.2f %8.0f%%", k.Bytes, k.GBps, 100*k.Fraction)
		}
		fmt.Fprintln(w)
	}
	var bytes int64
	for _, k := range r.Kinds {
		bytes += k.Bytes
	}
	fmt.Fprintf(w, "%-10s %6s %10s %7s %10s %12d   (the matrix products' bytes read and written per token; cpu ms: the process's CPU time, steadier than wall time on shared cores)\n", "all", "", "", "", "", bytes)
	fmt.Fprintf(w, "\n%-10s %6s %10s\n", "layer", "ops", "ms/token")
	for _, l := range r.Layers {
		name := fmt.Sprint(l.Layer)
		switch {
		case l.Layer < 0:
			name = "embed"
		case l.Layer == r.Layers[len(r.Layers)-1].Layer && l.Layer > 0:
			name = "head"
		}
		fmt.Fprintf(w, "%-10s %6d %10.3f\n", name, l.Count, ms(l.Time))
	}
	fmt.Fprintf(w, "\ncopy bandwidth    %.2f GB/s (the bound each matrix product's GB/s is set against)\n", r.CopyGBps)
}
