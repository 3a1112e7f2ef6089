package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// value is a JSON value that keeps the order of object keys: a schema's
// properties are generated in the order the schema lists them.
type value struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys []string
	vals []*value // object values (parallel to keys) or array items
	str  string
	num  json.Number
	b    bool
}

// parseValue decodes data, refusing values nested deeper than MaxNesting
// (the decoder recurses once per level).
func parseValue(data []byte) (*value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (*value, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		if depth >= MaxNesting {
			return nil, budgetError("values nest deeper than %d (MaxNesting)", MaxNesting)
		}
		switch t {
		case '{':
			v := &value{kind: 'o'}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				x, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
				v.vals = append(v.vals, x)
			}
			_, err := d.Token()
			return v, err
		case '[':
			v := &value{kind: 'a'}
			for d.More() {
				x, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				v.vals = append(v.vals, x)
			}
			_, err := d.Token()
			return v, err
		}
	case string:
		return &value{kind: 's', str: t}, nil
	case json.Number:
		return &value{kind: 'n', num: t}, nil
	case bool:
		return &value{kind: 'b', b: t}, nil
	case nil:
		return &value{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

// get returns the value of key k of an object, or nil.
func (v *value) get(k string) *value {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for i, key := range v.keys {
		if key == k {
			return v.vals[i]
		}
	}
	return nil
}

// compact is v as compact JSON, keys in their order.
func (v *value) compact() string {
	var b strings.Builder
	v.writeJSON(&b)
	return b.String()
}

func (v *value) writeJSON(b *strings.Builder) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			v.vals[i].writeJSON(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, x := range v.vals {
			if i > 0 {
				b.WriteByte(',')
			}
			x.writeJSON(b)
		}
		b.WriteByte(']')
	case 's':
		sb, _ := json.Marshal(v.str)
		b.Write(sb)
	case 'n':
		b.WriteString(v.num.String())
	case 'b':
		fmt.Fprint(b, v.b)
	case 'z':
		b.WriteString("null")
	}
}
