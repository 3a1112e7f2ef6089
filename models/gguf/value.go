package gguf

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value, as stored in the file.
type ValueType uint32

// The metadata value types defined by the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value_type(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// minSize is the fewest bytes a value of type t occupies in a file: its
// fixed width for scalars, a length prefix for strings, and a type tag
// plus count for arrays. Bounding counts by remaining/minSize is what
// keeps a corrupt count from turning into a huge allocation.
func (t ValueType) minSize() int64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64, TypeString:
		return 8
	case TypeArray:
		return 4 + 8
	}
	return 0
}

// Value is one metadata value: a scalar, a string, or an array whose
// elements all have one type (arrays of arrays may differ per element).
// The zero Value is the uint8 0. Values are immutable: accessors that
// return slices return copies.
type Value struct {
	typ ValueType
	// bits holds scalars: unsigned integers as is, signed ones
	// sign-extended, floats as their IEEE bits, bools as 0 or 1.
	bits uint64
	// ref holds a string's text, or an array's elements as the Go slice
	// type that matches the element type ([]Value for nested arrays).
	ref any
}

// ArrayElem lists the Go types that ArrayValue accepts, one per GGUF
// element type; []Value makes an array of arrays.
type ArrayElem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool |
		string | uint64 | int64 | float64 | Value
}

// Uint8Value returns a uint8 value.
func Uint8Value(v uint8) Value { return Value{typ: TypeUint8, bits: uint64(v)} }

// Int8Value returns an int8 value.
func Int8Value(v int8) Value { return Value{typ: TypeInt8, bits: uint64(int64(v))} }

// Uint16Value returns a uint16 value.
func Uint16Value(v uint16) Value { return Value{typ: TypeUint16, bits: uint64(v)} }

// Int16Value returns an int16 value.
func Int16Value(v int16) Value { return Value{typ: TypeInt16, bits: uint64(int64(v))} }

// Uint32Value returns a uint32 value.
func Uint32Value(v uint32) Value { return Value{typ: TypeUint32, bits: uint64(v)} }

// Int32Value returns an int32 value.
func Int32Value(v int32) Value { return Value{typ: TypeInt32, bits: uint64(int64(v))} }

// Uint64Value returns a uint64 value.
func Uint64Value(v uint64) Value { return Value{typ: TypeUint64, bits: v} }

// Int64Value returns an int64 value.
func Int64Value(v int64) Value { return Value{typ: TypeInt64, bits: uint64(v)} }

// Float32Value returns a float32 value.
func Float32Value(v float32) Value { return Value{typ: TypeFloat32, bits: uint64(math.Float32bits(v))} }

// Float64Value returns a float64 value.
func Float64Value(v float64) Value { return Value{typ: TypeFloat64, bits: math.Float64bits(v)} }

// StringValue returns a string value.
func StringValue(s string) Value { return Value{typ: TypeString, ref: s} }

// BoolValue returns a bool value.
func BoolValue(v bool) Value {
	if v {
		return Value{typ: TypeBool, bits: 1}
	}
	return Value{typ: TypeBool}
}

// ArrayValue returns an array holding a copy of xs; the element type
// follows from T. For []Value every element must itself be an array,
// which Write checks.
func ArrayValue[T ArrayElem](xs []T) Value {
	return Value{typ: TypeArray, ref: slices.Clip(slices.Clone(xs))}
}

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns an array's element type; for other values it returns
// the value's own type.
func (v Value) ElemType() ValueType {
	if v.typ != TypeArray {
		return v.typ
	}
	switch v.ref.(type) {
	case []uint8:
		return TypeUint8
	case []int8:
		return TypeInt8
	case []uint16:
		return TypeUint16
	case []int16:
		return TypeInt16
	case []uint32:
		return TypeUint32
	case []int32:
		return TypeInt32
	case []float32:
		return TypeFloat32
	case []bool:
		return TypeBool
	case []string:
		return TypeString
	case []uint64:
		return TypeUint64
	case []int64:
		return TypeInt64
	case []float64:
		return TypeFloat64
	}
	return TypeArray
}

// Len returns an array's length, or 0 for other values.
func (v Value) Len() int {
	switch a := v.ref.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// Index returns element i of an array. It panics if v is not an array or
// i is out of range, like indexing a slice.
func (v Value) Index(i int) Value {
	switch a := v.ref.(type) {
	case []uint8:
		return Uint8Value(a[i])
	case []int8:
		return Int8Value(a[i])
	case []uint16:
		return Uint16Value(a[i])
	case []int16:
		return Int16Value(a[i])
	case []uint32:
		return Uint32Value(a[i])
	case []int32:
		return Int32Value(a[i])
	case []float32:
		return Float32Value(a[i])
	case []bool:
		return BoolValue(a[i])
	case []string:
		return StringValue(a[i])
	case []uint64:
		return Uint64Value(a[i])
	case []int64:
		return Int64Value(a[i])
	case []float64:
		return Float64Value(a[i])
	case []Value:
		return a[i]
	}
	panic(fmt.Sprintf("gguf: Index of a %v value", v.typ))
}

func (t ValueType) signed() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

func (t ValueType) unsigned() bool {
	return t == TypeUint8 || t == TypeUint16 || t == TypeUint32 || t == TypeUint64
}

// Uint returns an integer value of any width or signedness if it is not
// negative: writers disagree on whether counts are uint32, int32 or
// uint64, and readers should not care.
func (v Value) Uint() (uint64, bool) {
	switch {
	case v.typ.unsigned():
		return v.bits, true
	case v.typ.signed() && int64(v.bits) >= 0:
		return v.bits, true
	}
	return 0, false
}

// Int returns an integer value of any width or signedness if it fits in an
// int64.
func (v Value) Int() (int64, bool) {
	switch {
	case v.typ.signed():
		return int64(v.bits), true
	case v.typ.unsigned() && v.bits <= math.MaxInt64:
		return int64(v.bits), true
	}
	return 0, false
}

// Float returns a float32 or float64 value, or an integer converted to
// float64, since a hyperparameter like a RoPE base is sometimes written
// as an integer.
func (v Value) Float() (float64, bool) {
	switch {
	case v.typ == TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case v.typ == TypeFloat64:
		return math.Float64frombits(v.bits), true
	case v.typ.signed():
		return float64(int64(v.bits)), true
	case v.typ.unsigned():
		return float64(v.bits), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) {
	if v.typ != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// Text returns a string value. (String formats any value for printing.)
func (v Value) Text() (string, bool) {
	s, ok := v.ref.(string)
	return s, ok && v.typ == TypeString
}

// Strings returns a copy of an array of strings.
func (v Value) Strings() ([]string, bool) {
	a, ok := v.ref.([]string)
	return slices.Clone(a), ok
}

// Float32s returns a copy of an array of float32, or of float64 narrowed
// to float32.
func (v Value) Float32s() ([]float32, bool) {
	switch a := v.ref.(type) {
	case []float32:
		return slices.Clone(a), true
	case []float64:
		return convert[float32](a), true
	}
	return nil, false
}

// Int32s returns an array of integers of any type as int32s, provided
// every element fits.
func (v Value) Int32s() ([]int32, bool) {
	if !v.ElemType().signed() && !v.ElemType().unsigned() {
		return nil, false
	}
	out := make([]int32, v.Len())
	for i := range out {
		n, ok := v.Index(i).Int()
		if !ok || n < math.MinInt32 || n > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(n)
	}
	return out, true
}

func convert[To, From float32 | float64](xs []From) []To {
	out := make([]To, len(xs))
	for i, x := range xs {
		out[i] = To(x)
	}
	return out
}

// String formats the value for humans: arrays show their element type,
// length and first few elements.
func (v Value) String() string {
	switch v.typ {
	case TypeString:
		s, _ := v.Text()
		return strconv.Quote(s)
	case TypeBool:
		b, _ := v.Bool()
		return strconv.FormatBool(b)
	case TypeFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32)
	case TypeFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case TypeArray:
		const show = 8
		var b strings.Builder
		fmt.Fprintf(&b, "[%d]%v{", v.Len(), v.ElemType())
		for i := range min(v.Len(), show) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.Index(i).String())
		}
		if v.Len() > show {
			b.WriteString(", ...")
		}
		b.WriteString("}")
		return b.String()
	}
	if n, ok := v.Int(); ok {
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatUint(v.bits, 10)
}
