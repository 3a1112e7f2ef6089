package chat

import (
	"reflect"
	"sort"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// filters are gonja's filters, with items in a fixed order. gonja's own
// items filter walks a Go map in Go's random order, so a template that
// renders a tool's properties or a call's arguments with |items
// (Qwen3-Coder's and Qwen3.5's) would write a different prompt each
// time: a prompt cache could not reuse it, and the model would see its
// own calls reordered. The keys come sorted, as gonja's dict.items()
// method sorts them (Python keeps the order the JSON had, which a Go map
// has lost).
func filters() *exec.FilterSet {
	f := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(gonja.DefaultEnvironment.Filters)
	base, _ := f.Get("items")
	f.Replace("items", func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() || !in.IsDict() || reflect.ValueOf(in.Interface()).Kind() != reflect.Map || len(params.Args) > 0 || len(params.KwArgs) > 0 {
			return base(e, in, params)
		}
		m := reflect.ValueOf(in.Interface())
		keys := m.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		items := make([]any, 0, len(keys))
		for _, k := range keys {
			items = append(items, []any{k.Interface(), m.MapIndex(k).Interface()})
		}
		return exec.AsValue(items)
	})
	return f
}
