package grammar

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Objects and arrays of a JSON Schema, and allOf, which merges object
// schemas into one.

// objectKeywords are those an object schema may carry (besides
// annotations and "type": "object") in an allOf branch.
var objectKeywords = []string{"properties", "required", "additionalProperties", "minProperties", "maxProperties"}

func (c *schemaCompiler) object(s *value, ptr string) (string, error) {
	return c.objectAt(s, ptr, func(k string) string { return ptr + "/properties/" + escapePointer(k) })
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// objectAt compiles an object schema whose property k's schema sits at
// propPtr(k) (allOf merges gather properties from several branches).
func (c *schemaCompiler) objectAt(s *value, ptr string, propPtr func(string) string) (string, error) {
	c.use("ws")
	props := s.get("properties")
	var required []string
	if r := s.get("required"); r != nil {
		if r.kind != 'a' {
			return "", errAt(ptr, "required", "must be an array of strings")
		}
		for _, x := range r.vals {
			if x.kind != 's' {
				return "", errAt(ptr, "required", "must be an array of strings")
			}
			required = append(required, x.str)
		}
	}
	minP, _, err := intKeyword(s, ptr, "minProperties")
	if err != nil {
		return "", err
	}
	maxP, hasMaxP, err := intKeyword(s, ptr, "maxProperties")
	if err != nil {
		return "", err
	}
	if hasMaxP && maxP < minP {
		return "", errAt(ptr, "maxProperties", "is below minProperties")
	}
	if minP > MaxRepeat || maxP > MaxRepeat {
		return "", errAt(ptr, "maxProperties", "counts above %d are not supported", MaxRepeat)
	}
	addl := s.get("additionalProperties")
	if pp := s.get("patternProperties"); pp != nil {
		return c.patternObject(s, pp, addl, ptr, minP, maxP, hasMaxP)
	}
	if props == nil && len(required) == 0 {
		if addl != nil && addl.kind == 'b' && !addl.b {
			if minP > 0 {
				return "", errAt(ptr, "minProperties", "an object without properties cannot have %d", minP)
			}
			return `"{" ws "}"`, nil
		}
		val := c.use("value")
		if addl != nil && !(addl.kind == 'b' && addl.b) {
			if val, err = c.schema(addl, ptr+"/additionalProperties"); err != nil {
				return "", err
			}
		} else if minP == 0 && !hasMaxP {
			return c.use("object"), nil
		}
		return c.freeKeys(c.use("string"), val, ptr, minP, maxP, hasMaxP)
	}
	if props != nil && props.kind != 'o' {
		return "", errAt(ptr, "properties", "must be an object")
	}
	type prop struct {
		name string
		expr string
		req  bool
	}
	var ps []prop
	if props != nil {
		for i, k := range props.keys {
			e, err := c.schema(props.vals[i], propPtr(k))
			if err != nil {
				return "", err
			}
			ps = append(ps, prop{k, e, slices.Contains(required, k)})
		}
	}
	for _, r := range required {
		if props.get(r) == nil {
			if addl != nil && addl.kind == 'b' && !addl.b {
				return "", errAt(ptr, "required", "%q is required but additionalProperties is false", r)
			}
			ps = append(ps, prop{r, c.use("value"), true})
		}
	}
	nreq := 0
	for _, p := range ps {
		if p.req {
			nreq++
		}
	}
	if hasMaxP && nreq > maxP {
		return "", errAt(ptr, "maxProperties", "%d properties are required, more than %d", nreq, maxP)
	}
	if minP > len(ps) {
		return "", errAt(ptr, "minProperties", "only %d properties are listed, fewer than %d", len(ps), minP)
	}
	// members(i, k) is the rule for the members from i on after k were
	// written (k counts up to what matters: maxP when bounded, else
	// minP, and at least 1, so that a member after another starts with a
	// comma); "" when none can follow.
	capK := max(minP, 1)
	if hasMaxP {
		capK = maxP
	}
	type key struct{ i, k int }
	memo := map[key]string{}
	var members func(i, k int) string
	members = func(i, k int) string {
		if r, ok := memo[key{i, k}]; ok {
			return r
		}
		var alts []string
		if i == len(ps) {
			if k >= minP {
				alts = append(alts, `""`)
			}
		} else {
			p := ps[i]
			if !hasMaxP || k < maxP {
				if next := members(i+1, min(k+1, capK)); next != "" {
					kv := fmt.Sprintf(`%s ws ":" ws %s ws`, Quote(strconvQuote(p.name)), p.expr)
					if k > 0 {
						kv = `"," ws ` + kv
					}
					alts = append(alts, kv+" "+next)
				}
			}
			if !p.req {
				if next := members(i+1, k); next != "" {
					alts = append(alts, next)
				}
			}
		}
		r := ""
		if len(alts) > 0 {
			r = c.fresh(fmt.Sprintf("%s/m%d-%d", ptr, i, k), strings.Join(alts, " | "))
		}
		memo[key{i, k}] = r
		return r
	}
	body := members(0, 0)
	if body == "" {
		return "", errAt(ptr, "minProperties", "no object has the properties these bounds ask for")
	}
	return fmt.Sprintf(`"{" ws %s "}"`, body), nil
}

// freeKeys is an object of members key: val, counted by min/maxProperties
// (and MaxItems, when unbounded). Keys are not kept distinct, so a
// duplicate would count once: minProperties is refused here.
func (c *schemaCompiler) freeKeys(keyExpr, val, ptr string, minP, maxP int, hasMaxP bool) (string, error) {
	if minP > 0 {
		return "", errAt(ptr, "minProperties", "minProperties needs listed properties: a grammar cannot keep free keys distinct")
	}
	kv := fmt.Sprintf(`%s ws ":" ws %s ws`, keyExpr, val)
	rep := "*"
	switch {
	case hasMaxP && maxP == 0:
		return `"{" ws "}"`, nil
	case hasMaxP:
		rep = fmt.Sprintf("{0,%d}", maxP-1)
	case c.opts.MaxItems > 0:
		rep = fmt.Sprintf("{0,%d}", c.opts.MaxItems-1)
	}
	return c.fresh(ptr+"/map", fmt.Sprintf(`"{" ws ( %s ( "," ws %s )%s )? "}"`, kv, kv, rep)), nil
}

// patternObject is an object whose keys match the one pattern of
// patternProperties, each with that pattern's schema. The keys generated
// match the pattern whole (a subset of what an unanchored pattern
// allows), so other keys (additionalProperties) never appear.
func (c *schemaCompiler) patternObject(s, pp, addl *value, ptr string, minP, maxP int, hasMaxP bool) (string, error) {
	if pp.kind != 'o' || len(pp.keys) != 1 {
		return "", errAt(ptr, "patternProperties", "only one pattern is supported: a key matching two would need both schemas")
	}
	if s.get("properties") != nil || s.get("required") != nil {
		return "", errAt(ptr, "patternProperties", "patternProperties beside properties or required is not supported")
	}
	if addl != nil && addl.kind != 'b' {
		return "", errAt(ptr, "additionalProperties", "a schema beside patternProperties is not supported")
	}
	pat := pp.keys[0]
	n, err := parseRegex(strings.TrimSuffix(strings.TrimPrefix(pat, "^"), "$"))
	if err != nil {
		return "", errAt(ptr+"/patternProperties", pat, "%v", err)
	}
	val, err := c.schema(pp.vals[0], ptr+"/patternProperties/"+escapePointer(pat))
	if err != nil {
		return "", err
	}
	keyExpr := c.fresh(ptr+"/key", `"\"" `+jsonEscaped(n).gbnf()+` "\""`)
	return c.freeKeys(keyExpr, val, ptr, minP, maxP, hasMaxP)
}

// allOf merges object schemas: their properties in order of first
// mention (one listed by two branches must fit both: an allOf of the two),
// the union of required, the tightest property counts, and no key that a
// branch with additionalProperties false leaves out. The schema's own
// object keywords are one more branch; branches that allow anything
// (true, {}) drop out.
func (c *schemaCompiler) allOf(s *value, ptr string) (string, error) {
	type branch struct {
		v   *value
		ptr string
	}
	var bs []branch
	own := &value{kind: 'o'}
	typed := false
	for i, k := range s.keys {
		switch {
		case k == "allOf" || slices.Contains(annotations, k):
		case k == "type":
			if t := s.vals[i]; t.kind != 's' || t.str != "object" {
				return "", errAt(ptr, "type", `allOf merges object schemas only (type "object")`)
			}
			typed = true
		case slices.Contains(objectKeywords, k):
			own.keys, own.vals = append(own.keys, k), append(own.vals, s.vals[i])
		default:
			return "", errAt(ptr, k, "keywords beside allOf are not supported")
		}
	}
	var nontrivial []int
	for i, b := range s.get("allOf").vals {
		if !(b.kind == 'b' && b.b) && !(b.kind == 'o' && !slices.ContainsFunc(b.keys, func(k string) bool { return !slices.Contains(annotations, k) })) {
			nontrivial = append(nontrivial, i)
		}
	}
	if len(nontrivial) == 1 && len(own.keys) == 0 && !typed { // one schema: itself
		i := nontrivial[0]
		return c.schema(s.get("allOf").vals[i], fmt.Sprintf("%s/allOf/%d", ptr, i))
	}
	for _, i := range nontrivial {
		b := s.get("allOf").vals[i]
		bptr := fmt.Sprintf("%s/allOf/%d", ptr, i)
		for b.kind == 'o' && b.get("$ref") != nil && len(b.keys) == 1 {
			t, err := c.resolve(b.get("$ref"), bptr)
			if err != nil {
				return "", err
			}
			b, bptr = t, strings.TrimPrefix(b.get("$ref").str, "#")
		}
		if b.kind != 'o' {
			return "", errAt(bptr, "", "allOf merges object schemas only")
		}
		for k, kw := range b.keys {
			if slices.Contains(annotations, kw) || slices.Contains(objectKeywords, kw) {
				continue
			}
			if kw == "type" && b.vals[k].kind == 's' && b.vals[k].str == "object" {
				continue
			}
			return "", errAt(bptr, kw, "allOf merges object schemas only (properties, required, additionalProperties, min/maxProperties)")
		}
		bs = append(bs, branch{b, bptr})
	}
	if len(own.keys) > 0 {
		bs = append(bs, branch{own, ptr})
	}
	switch {
	case len(bs) == 0:
		return c.use("value"), nil
	case len(bs) == 1:
		return c.objectAt(bs[0].v, bs[0].ptr, func(k string) string { return bs[0].ptr + "/properties/" + escapePointer(k) })
	}
	merged := &value{kind: 'o', keys: []string{"type"}, vals: []*value{{kind: 's', str: "object"}}}
	props := &value{kind: 'o'}
	where := map[string]string{} // property → pointer of its schema
	var required []*value
	closed := false
	minP, maxP, hasMaxP := 0, 0, false
	for _, b := range bs {
		if p := b.v.get("properties"); p != nil {
			if p.kind != 'o' {
				return "", errAt(b.ptr, "properties", "must be an object")
			}
			for i, k := range p.keys {
				at := b.ptr + "/properties/" + escapePointer(k)
				prev := props.get(k)
				switch {
				case prev == nil:
					props.keys, props.vals = append(props.keys, k), append(props.vals, p.vals[i])
					where[k] = at
				case prev.compact() != p.vals[i].compact():
					both, err := bothOf(prev, p.vals[i], at)
					if err != nil {
						return "", err
					}
					props.vals[slices.Index(props.keys, k)] = both
				}
			}
		}
		if r := b.v.get("required"); r != nil {
			if r.kind != 'a' {
				return "", errAt(b.ptr, "required", "must be an array of strings")
			}
			for _, x := range r.vals {
				if !slices.ContainsFunc(required, func(y *value) bool { return y.compact() == x.compact() }) {
					required = append(required, x)
				}
			}
		}
		if a := b.v.get("additionalProperties"); a != nil {
			if a.kind != 'b' {
				return "", errAt(b.ptr, "additionalProperties", "allOf merges additionalProperties true or false only")
			}
			closed = closed || !a.b
		}
		lo, _, err := intKeyword(b.v, b.ptr, "minProperties")
		if err != nil {
			return "", err
		}
		hi, has, err := intKeyword(b.v, b.ptr, "maxProperties")
		if err != nil {
			return "", err
		}
		minP = max(minP, lo)
		if has && (!hasMaxP || hi < maxP) {
			maxP, hasMaxP = hi, true
		}
	}
	// A branch that is closed admits only its own properties.
	for _, b := range bs {
		a := b.v.get("additionalProperties")
		if a == nil || a.b {
			continue
		}
		own := b.v.get("properties")
		for i := 0; i < len(props.keys); i++ {
			k := props.keys[i]
			if own != nil && own.get(k) != nil {
				continue
			}
			if slices.ContainsFunc(required, func(y *value) bool { return y.kind == 's' && y.str == k }) {
				return "", errAt(b.ptr, "additionalProperties", "%q is required by allOf but this branch does not allow it", k)
			}
			props.keys, props.vals = slices.Delete(props.keys, i, i+1), slices.Delete(props.vals, i, i+1)
			i--
		}
	}
	merged.keys, merged.vals = append(merged.keys, "properties"), append(merged.vals, props)
	if len(required) > 0 {
		merged.keys, merged.vals = append(merged.keys, "required"), append(merged.vals, &value{kind: 'a', vals: required})
	}
	if closed {
		merged.keys, merged.vals = append(merged.keys, "additionalProperties"), append(merged.vals, &value{kind: 'b'})
	}
	if minP > 0 {
		merged.keys, merged.vals = append(merged.keys, "minProperties"), append(merged.vals, &value{kind: 'n', num: jsonNumber(minP)})
	}
	if hasMaxP {
		merged.keys, merged.vals = append(merged.keys, "maxProperties"), append(merged.vals, &value{kind: 'n', num: jsonNumber(maxP)})
	}
	return c.objectAt(merged, ptr+"/allOf", func(k string) string {
		if at, ok := where[k]; ok {
			return at
		}
		return ptr + "/allOf"
	})
}

func (c *schemaCompiler) array(s *value, ptr string) (string, error) {
	c.use("ws")
	minN, _, err := intKeyword(s, ptr, "minItems")
	if err != nil {
		return "", err
	}
	maxN, hasMax, err := intKeyword(s, ptr, "maxItems")
	if err != nil {
		return "", err
	}
	if hasMax && maxN < minN {
		return "", errAt(ptr, "maxItems", "is below minItems")
	}
	if minN > MaxRepeat || maxN > MaxRepeat {
		return "", errAt(ptr, "maxItems", "counts above %d are not supported", MaxRepeat)
	}
	if u := s.get("uniqueItems"); u != nil && u.kind == 'b' && u.b && !(hasMax && maxN <= 1) {
		return "", errAt(ptr, "uniqueItems", "a grammar cannot keep items distinct")
	}
	var prefix []string // the items of prefixItems, each followed by ws
	if p := s.get("prefixItems"); p != nil {
		if p.kind != 'a' {
			return "", errAt(ptr, "prefixItems", "must be an array of schemas")
		}
		for i, x := range p.vals {
			e, err := c.schema(x, fmt.Sprintf("%s/prefixItems/%d", ptr, i))
			if err != nil {
				return "", err
			}
			prefix = append(prefix, c.fresh(fmt.Sprintf("%s/prefixItems/%d", ptr, i), e+" ws"))
		}
	}
	n := len(prefix)
	item := c.use("value")
	if it := s.get("items"); it != nil {
		switch {
		case it.kind == 'a':
			return "", errAt(ptr, "items", "tuple items (an array) are not supported; use prefixItems")
		case it.kind == 'b' && !it.b: // nothing after the prefix
			if minN > n {
				return "", errAt(ptr, "minItems", "items is false after %d prefixItems, fewer than %d", n, minN)
			}
			if !hasMax || maxN > n {
				maxN, hasMax = n, true
			}
		default:
			if item, err = c.schema(it, ptr+"/items"); err != nil {
				return "", err
			}
		}
	}
	if !hasMax && c.opts.MaxItems > 0 {
		maxN, hasMax = max(minN, c.opts.MaxItems, min(n, MaxRepeat)), true
	}
	if hasMax && maxN == 0 {
		return `"[" ws "]"`, nil
	}
	// The items after the prefix: at least minN-n, at most maxN-n.
	lo, hi := max(minN-n, 0), maxN-n
	var tail string
	if !hasMax || hi > 0 {
		item = c.fresh(ptr+"/item", item+" ws")
		more := fmt.Sprintf(`( "," ws %s )`, item)
		switch {
		case n > 0 && !hasMax:
			tail = fmt.Sprintf(`%s{%d,}`, more, lo)
		case n > 0:
			tail = fmt.Sprintf(`%s{%d,%d}`, more, lo, hi)
		default:
			counts := fmt.Sprintf("{%d,}", max(minN-1, 0))
			if hasMax {
				counts = fmt.Sprintf("{%d,%d}", max(minN-1, 0), maxN-1)
			}
			tail = fmt.Sprintf(`%s %s%s`, item, more, counts)
			if minN == 0 {
				tail = "( " + tail + " )?"
			}
		}
	}
	// The prefix, from its end: item i may be the last when i items are
	// enough, and none comes past maxN.
	body := tail
	for i := n - 1; i >= 0; i-- {
		if hasMax && i >= maxN {
			body = ""
			continue
		}
		elem := prefix[i]
		if i > 0 {
			elem = `"," ws ` + elem
		}
		if body != "" {
			elem += " " + body
		}
		if i >= minN {
			elem = "( " + elem + " )?"
		}
		body = elem
	}
	if body == "" {
		body = `""`
	}
	return c.fresh(ptr+"/array", fmt.Sprintf(`"[" ws %s "]"`, body)), nil
}

func jsonNumber(n int) json.Number { return json.Number(strconv.Itoa(n)) }

// bothOf is a schema for what fits both a and b (a property that two
// allOf branches list): an allOf of them when both are object schemas,
// which merges again, else the union of their keywords, when no keyword
// is in both with different values and none is split from the keyword it
// works with (additionalProperties from properties, items from
// prefixItems). at is b's pointer, for errors.
func bothOf(a, b *value, at string) (*value, error) {
	isObject := func(v *value) bool {
		t := v.get("type")
		return v.kind == 'o' && (t != nil && t.kind == 's' && t.str == "object" || t == nil && v.get("properties") != nil)
	}
	if isObject(a) && isObject(b) {
		return &value{kind: 'o', keys: []string{"allOf"}, vals: []*value{{kind: 'a', vals: []*value{a, b}}}}, nil
	}
	if a.kind != 'o' || b.kind != 'o' {
		return nil, errAt(at, "", "allOf branches give this property different schemas that cannot be merged")
	}
	out := &value{kind: 'o', keys: slices.Clone(a.keys), vals: slices.Clone(a.vals)}
	for i, k := range b.keys {
		if x := a.get(k); x != nil {
			if x.compact() != b.vals[i].compact() && !slices.Contains(annotations, k) {
				return nil, errAt(at, k, "allOf branches give this property different %q", k)
			}
			continue
		}
		out.keys, out.vals = append(out.keys, k), append(out.vals, b.vals[i])
	}
	for _, pair := range [][2]string{{"additionalProperties", "properties"}, {"additionalProperties", "patternProperties"}, {"items", "prefixItems"}} {
		for _, v := range []*value{a, b} {
			if v.get(pair[0]) != nil && v.get(pair[1]) == nil && out.get(pair[1]) != nil {
				return nil, errAt(at, pair[0], "allOf would join %q to another branch's %q", pair[0], pair[1])
			}
		}
	}
	return out, nil
}
