package gguf

import (
	"math"
	"slices"
	"testing"
)

func TestValueScalars(t *testing.T) {
	type res[T any] struct {
		v  T
		ok bool
	}
	tests := []struct {
		name  string
		v     Value
		typ   ValueType
		uint  res[uint64]
		int   res[int64]
		float res[float64]
		str   string // String()
	}{
		{"uint8", Uint8Value(200), TypeUint8, res[uint64]{200, true}, res[int64]{200, true}, res[float64]{200, true}, "200"},
		{"int8 negative", Int8Value(-5), TypeInt8, res[uint64]{0, false}, res[int64]{-5, true}, res[float64]{-5, true}, "-5"},
		{"int16 positive", Int16Value(7), TypeInt16, res[uint64]{7, true}, res[int64]{7, true}, res[float64]{7, true}, "7"},
		{"uint32", Uint32Value(math.MaxUint32), TypeUint32, res[uint64]{math.MaxUint32, true}, res[int64]{math.MaxUint32, true}, res[float64]{math.MaxUint32, true}, "4294967295"},
		{"int32 min", Int32Value(math.MinInt32), TypeInt32, res[uint64]{0, false}, res[int64]{math.MinInt32, true}, res[float64]{math.MinInt32, true}, "-2147483648"},
		{"uint64 max", Uint64Value(math.MaxUint64), TypeUint64, res[uint64]{math.MaxUint64, true}, res[int64]{0, false}, res[float64]{math.MaxUint64, true}, "18446744073709551615"},
		{"int64 min", Int64Value(math.MinInt64), TypeInt64, res[uint64]{0, false}, res[int64]{math.MinInt64, true}, res[float64]{math.MinInt64, true}, "-9223372036854775808"},
		{"float32", Float32Value(1e-5), TypeFloat32, res[uint64]{}, res[int64]{}, res[float64]{float64(float32(1e-5)), true}, "1e-05"},
		{"float64", Float64Value(-2.5), TypeFloat64, res[uint64]{}, res[int64]{}, res[float64]{-2.5, true}, "-2.5"},
		{"bool", BoolValue(true), TypeBool, res[uint64]{}, res[int64]{}, res[float64]{}, "true"},
		{"string", StringValue("a\"b"), TypeString, res[uint64]{}, res[int64]{}, res[float64]{}, `"a\"b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.v.Type() != tt.typ || tt.v.ElemType() != tt.typ || tt.v.Len() != 0 {
				t.Errorf("Type %v, ElemType %v, Len %d", tt.v.Type(), tt.v.ElemType(), tt.v.Len())
			}
			if u, ok := tt.v.Uint(); u != tt.uint.v || ok != tt.uint.ok {
				t.Errorf("Uint() = %d, %v; want %d, %v", u, ok, tt.uint.v, tt.uint.ok)
			}
			if i, ok := tt.v.Int(); i != tt.int.v || ok != tt.int.ok {
				t.Errorf("Int() = %d, %v; want %d, %v", i, ok, tt.int.v, tt.int.ok)
			}
			if f, ok := tt.v.Float(); f != tt.float.v || ok != tt.float.ok {
				t.Errorf("Float() = %v, %v; want %v, %v", f, ok, tt.float.v, tt.float.ok)
			}
			if got := tt.v.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			_, isBool := tt.v.Bool()
			_, isText := tt.v.Text()
			if isBool != (tt.typ == TypeBool) || isText != (tt.typ == TypeString) {
				t.Errorf("Bool ok = %v, Text ok = %v", isBool, isText)
			}
		})
	}
}

func TestValueArrays(t *testing.T) {
	src := []string{"a", "b"}
	strs := ArrayValue(src)
	src[0] = "changed"
	if got, _ := strs.Strings(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("ArrayValue did not copy its input: %q", got)
	}
	got, _ := strs.Strings()
	got[1] = "changed"
	if again, _ := strs.Strings(); again[1] != "b" {
		t.Error("Strings returned the value's own slice")
	}

	tests := []struct {
		name    string
		v       Value
		elem    ValueType
		n       int
		int32s  []int32
		float32 []float32
		str     string
	}{
		{"uint8s", ArrayValue([]uint8{1, 255}), TypeUint8, 2, []int32{1, 255}, nil, "[2]uint8{1, 255}"},
		{"int64s in range", ArrayValue([]int64{-3, 4}), TypeInt64, 2, []int32{-3, 4}, nil, "[2]int64{-3, 4}"},
		{"int64s out of range", ArrayValue([]int64{1 << 40}), TypeInt64, 1, nil, nil, "[1]int64{1099511627776}"},
		{"uint32s out of range", ArrayValue([]uint32{math.MaxUint32}), TypeUint32, 1, nil, nil, "[1]uint32{4294967295}"},
		{"float32s", ArrayValue([]float32{0.5}), TypeFloat32, 1, nil, []float32{0.5}, "[1]float32{0.5}"},
		{"float64s narrowed", ArrayValue([]float64{0.25, 1e300}), TypeFloat64, 2, nil, []float32{0.25, float32(math.Inf(1))}, "[2]float64{0.25, 1e+300}"},
		{"bools", ArrayValue([]bool{true}), TypeBool, 1, nil, nil, "[1]bool{true}"},
		{"empty", ArrayValue([]int32{}), TypeInt32, 0, []int32{}, nil, "[0]int32{}"},
		{"long", ArrayValue(make([]int8, 10)), TypeInt8, 10, make([]int32, 10), nil, "[10]int8{0, 0, 0, 0, 0, 0, 0, 0, ...}"},
		{"nested", ArrayValue([]Value{ArrayValue([]string{"x"}), ArrayValue([]Value{})}), TypeArray, 2, nil, nil, `[2]array{[1]string{"x"}, [0]array{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.v.Type() != TypeArray || tt.v.ElemType() != tt.elem || tt.v.Len() != tt.n {
				t.Errorf("Type %v, ElemType %v, Len %d", tt.v.Type(), tt.v.ElemType(), tt.v.Len())
			}
			if got, ok := tt.v.Int32s(); ok != (tt.int32s != nil) || !slices.Equal(got, tt.int32s) {
				t.Errorf("Int32s() = %v, %v; want %v", got, ok, tt.int32s)
			}
			if got, ok := tt.v.Float32s(); ok != (tt.float32 != nil) || !slices.Equal(got, tt.float32) {
				t.Errorf("Float32s() = %v, %v; want %v", got, ok, tt.float32)
			}
			if got := tt.v.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
			if _, ok := tt.v.Uint(); ok {
				t.Error("Uint() of an array succeeded")
			}
		})
	}

	nested := ArrayValue([]Value{ArrayValue([]int16{-1, 2})})
	if inner := nested.Index(0); inner.ElemType() != TypeInt16 || inner.Index(1).String() != "2" {
		t.Errorf("nested.Index(0) = %v", inner)
	}
}

func TestValueTypeString(t *testing.T) {
	for typ, want := range map[ValueType]string{TypeUint8: "uint8", TypeArray: "array", TypeFloat64: "float64", 13: "value_type(13)"} {
		if got := typ.String(); got != want {
			t.Errorf("ValueType(%d).String() = %q, want %q", uint32(typ), got, want)
		}
	}
}

func TestFileAccessors(t *testing.T) {
	f, err := readBytes(t, sampleFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Int("test.i32"); !ok || v != -2000000000 {
		t.Errorf("Int(test.i32) = %d, %v", v, ok)
	}
	if _, ok := f.Uint("test.i32"); ok {
		t.Error("Uint of a negative value succeeded")
	}
	if v, ok := f.Bool("test.bool_true"); !ok || !v {
		t.Errorf("Bool = %v, %v", v, ok)
	}
	if v, ok := f.Float("test.u16"); !ok || v != 60000 {
		t.Errorf("Float of an integer = %v, %v", v, ok)
	}
	if _, ok := f.String("test.u8"); ok {
		t.Error("String of a uint8 succeeded")
	}
	if _, ok := f.Strings("missing.key"); ok {
		t.Error("Strings of a missing key succeeded")
	}
	if _, ok := f.Lookup("missing.key"); ok {
		t.Error("Lookup of a missing key succeeded")
	}
}
