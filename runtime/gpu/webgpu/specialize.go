package webgpu

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// overrideDecl matches a WGSL override declaration, with its optional @id
// attribute, type and initializer: `@id(0) override WG: u32 = 64;`.
var overrideDecl = regexp.MustCompile(
	`(?:@id\s*\([^)]*\)\s*)?\boverride\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*([A-Za-z_][A-Za-z0-9_]*)\s*)?(?:=\s*([^;]*?)\s*)?;`)

// Specialize applies override constants to WGSL source by rewriting every
// `override NAME: T = default;` into `const NAME: T = value;`, taking the
// value from constants or else keeping the default.
//
// Rewriting, rather than passing constants to pipeline creation, is needed
// because the WGSL compiler in wgpu-native as shipped with cogentcore/webgpu
// v0.23.0 does not parse `override` at all, and that binding has no field for
// pipeline constants either. The rewritten source compiles the same on every
// backend, so browser and host-call implementations can share this step.
//
// Constants are matched by name (numeric @id keys are not supported). A name
// in constants that the source does not declare is an error, as in WebGPU.
func Specialize(source string, constants map[string]float64) (string, error) {
	masked := maskComments(source)
	used := make(map[string]bool, len(constants))
	var b strings.Builder
	last := 0
	for _, m := range overrideDecl.FindAllStringSubmatchIndex(masked, -1) {
		name := masked[m[2]:m[3]]
		typ, init := "", ""
		if m[4] >= 0 {
			typ = masked[m[4]:m[5]]
		}
		if m[6] >= 0 {
			init = strings.TrimSpace(masked[m[6]:m[7]])
		}
		if typ == "" && init != "" {
			// An untyped override has the concrete type of its default;
			// spell it out so the const keeps that type.
			typ, _ = literalType(init)
		}
		value := init
		if v, ok := constants[name]; ok {
			used[name] = true
			if typ == "" {
				return "", fmt.Errorf("override %s: cannot infer its type from the default %q; declare it with a type", name, init)
			}
			lit, err := literal(v, typ)
			if err != nil {
				return "", fmt.Errorf("override %s: %w", name, err)
			}
			value = lit
		}
		if value == "" {
			return "", fmt.Errorf("override %s has no default and no value in Constants", name)
		}
		b.WriteString(source[last:m[0]])
		b.WriteString("const " + name)
		if typ != "" {
			b.WriteString(": " + typ)
		}
		b.WriteString(" = " + value + ";")
		last = m[1]
	}
	b.WriteString(source[last:])

	if len(used) != len(constants) {
		var unknown []string
		for name := range constants {
			if !used[name] {
				unknown = append(unknown, name)
			}
		}
		sort.Strings(unknown)
		return "", fmt.Errorf("constants %s are not override declarations in the source", strings.Join(unknown, ", "))
	}
	return b.String(), nil
}

// literal writes v as a WGSL literal of type typ.
func literal(v float64, typ string) (string, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", fmt.Errorf("value %v is not finite", v)
	}
	integral := v == math.Trunc(v)
	switch typ {
	case "bool":
		return strconv.FormatBool(v != 0), nil
	case "u32":
		if !integral || v < 0 || v > math.MaxUint32 {
			return "", fmt.Errorf("value %v does not fit u32", v)
		}
		return strconv.FormatUint(uint64(v), 10) + "u", nil
	case "i32":
		if !integral || v < math.MinInt32 || v > math.MaxInt32 {
			return "", fmt.Errorf("value %v does not fit i32", v)
		}
		return strconv.FormatInt(int64(v), 10) + "i", nil
	case "f32", "f16":
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s, nil
	}
	return "", fmt.Errorf("unsupported override type %q", typ)
}

var intLiteral = regexp.MustCompile(`^-?(0[xX][0-9a-fA-F]+|0|[1-9][0-9]*)([iu]?)$`)

// literalType infers the type of an untyped override from its default.
func literalType(init string) (string, error) {
	if init == "true" || init == "false" {
		return "bool", nil
	}
	if m := intLiteral.FindStringSubmatch(init); m != nil {
		switch m[2] {
		case "u":
			return "u32", nil
		case "i":
			return "i32", nil
		}
		return "i32", nil // WGSL concretizes an abstract int override to i32
	}
	if strings.HasSuffix(init, "h") {
		if _, err := strconv.ParseFloat(strings.TrimSuffix(init, "h"), 64); err == nil {
			return "f16", nil
		}
	}
	if _, err := strconv.ParseFloat(strings.TrimSuffix(init, "f"), 64); err == nil {
		return "f32", nil
	}
	return "", fmt.Errorf("cannot infer a type from %q", init)
}

// maskComments blanks out WGSL comments (// line and nested /* block */),
// keeping every other byte and newline in place, so that declarations found
// in the masked text have the same offsets in the original.
func maskComments(src string) string {
	out := []byte(src)
	depth := 0
	for i := 0; i < len(out); i++ {
		switch {
		case depth == 0 && strings.HasPrefix(src[i:], "//"):
			for i < len(out) && out[i] != '\n' {
				out[i] = ' '
				i++
			}
		case strings.HasPrefix(src[i:], "/*"):
			depth++
			out[i], out[i+1] = ' ', ' '
			i++
		case depth > 0 && strings.HasPrefix(src[i:], "*/"):
			depth--
			out[i], out[i+1] = ' ', ' '
			i++
		case depth > 0 && out[i] != '\n':
			out[i] = ' '
		}
	}
	return string(out)
}
