package rows

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// One property value per case: accepted values with their stored JSON rendering, refused
// ones with the exact reason and field.
func TestPropertyValues(t *testing.T) {
	cases := []struct {
		prop, value string
		want        string // stored value as JSON when accepted
		field       string // refused: field and reason
		reason      string
	}{
		// String
		{prop: "s", value: `"héllo ✓ 😀"`, want: `"héllo ✓ 😀"`},
		{prop: "s", value: `"a\"b\\c\n\u0001"`, want: `"a\"b\\c\n\u0001"`},
		{prop: "s", value: `5`, field: "data.s", reason: `strict property 's' expects Utf8, got 5`},
		{prop: "s", value: `["x"]`, field: "data.s", reason: `strict property 's' expects Utf8, got ["x"]`},
		// Bool
		{prop: "b", value: `false`, want: `false`},
		{prop: "b", value: `"true"`, field: "data.b", reason: `strict property 'b' expects Boolean, got "true"`},
		{prop: "b", value: `1`, field: "data.b", reason: `strict property 'b' expects Boolean, got 1`},
		// I32
		{prop: "i32", value: `2147483647`, want: `2147483647`},
		{prop: "i32", value: `-2147483648`, want: `-2147483648`},
		{prop: "i32", value: `2147483648`, field: "data.i32", reason: `property 'i32' value 2147483648 exceeds Int32 range`},
		{prop: "i32", value: `-2147483649`, field: "data.i32", reason: `property 'i32' value -2147483649 exceeds Int32 range`},
		{prop: "i32", value: `18446744073709551615`, field: "data.i32", reason: `property 'i32' value 18446744073709551615 exceeds Int32 range`},
		{prop: "i32", value: `"old"`, field: "data.i32", reason: `strict property 'i32' expects Int32, got "old"`},
		{prop: "i32", value: `1.0`, field: "data.i32", reason: `strict property 'i32' expects Int32, got 1.0`},
		{prop: "i32", value: `1e2`, field: "data.i32", reason: `strict property 'i32' expects Int32, got 1e2`},
		{prop: "i32", value: `-0`, field: "data.i32", reason: `strict property 'i32' expects Int32, got -0`},
		// I64: exact, no float rounding
		{prop: "i64", value: `9223372036854775807`, want: `9223372036854775807`},
		{prop: "i64", value: `-9223372036854775808`, want: `-9223372036854775808`},
		{prop: "i64", value: `9007199254740993`, want: `9007199254740993`},
		{prop: "i64", value: `9223372036854775808`, field: "data.i64", reason: `property 'i64' value 9223372036854775808 exceeds Int64 range`},
		{prop: "i64", value: `-9223372036854775809`, field: "data.i64", reason: `strict property 'i64' expects Int64, got -9223372036854775809`},
		// U32
		{prop: "u32", value: `4294967295`, want: `4294967295`},
		{prop: "u32", value: `0`, want: `0`},
		{prop: "u32", value: `4294967296`, field: "data.u32", reason: `property 'u32' value 4294967296 exceeds UInt32 range`},
		{prop: "u32", value: `-1`, field: "data.u32", reason: `property 'u32' value -1 exceeds UInt32 range`},
		// U64: the full range, exactly
		{prop: "u64", value: `18446744073709551615`, want: `18446744073709551615`},
		{prop: "u64", value: `18446744073709551614`, want: `18446744073709551614`},
		{prop: "u64", value: `-1`, field: "data.u64", reason: `property 'u64' value -1 exceeds UInt64 range`},
		{prop: "u64", value: `18446744073709551616`, field: "data.u64", reason: `strict property 'u64' expects UInt64, got 18446744073709551616`},
		// F32: range judged after rounding, finite
		{prop: "f32", value: `0.1`, want: `0.1`},
		{prop: "f32", value: `16777217`, want: `1.6777216e+07`},
		{prop: "f32", value: `3.4028235e38`, want: `3.4028235e+38`},
		{prop: "f32", value: `3.40282356e38`, want: `3.4028235e+38`},
		{prop: "f32", value: `3.4028235677973366e38`, field: "data.f32", reason: `property 'f32' value 340282356779733660000000000000000000000 exceeds Float32 range`},
		{prop: "f32", value: `3.5e38`, field: "data.f32", reason: `property 'f32' value 350000000000000000000000000000000000000 exceeds Float32 range`},
		{prop: "f32", value: `"1.5"`, field: "data.f32", reason: `strict property 'f32' expects Float32, got "1.5"`},
		// F64
		{prop: "f64", value: `-1.7976931348623157e308`, want: `-1.7976931348623157e+308`},
		{prop: "f64", value: `5e-324`, want: `5e-324`},
		{prop: "f64", value: `12345678901234567890`, want: `1.2345678901234567e+19`},
		{prop: "f64", value: `true`, field: "data.f64", reason: `strict property 'f64' expects Float64, got true`},
		// Date: integer days or ISO YYYY-MM-DD
		{prop: "d", value: `"2024-01-01"`, want: `19723`},
		{prop: "d", value: `19723`, want: `19723`},
		{prop: "d", value: `"1969-12-31"`, want: `-1`},
		{prop: "d", value: `-2147483648`, want: `-2147483648`},
		{prop: "d", value: `"2024-02-30"`, field: "data.d", reason: `invalid Date literal '2024-02-30'`},
		{prop: "d", value: `"2024-1-1"`, field: "data.d", reason: `invalid Date literal '2024-1-1'`},
		{prop: "d", value: `2147483648`, field: "data.d", reason: `Date value out of range: 2147483648`},
		{prop: "d", value: `18446744073709551615`, field: "data.d", reason: `Date value out of range: 18446744073709551615`},
		{prop: "d", value: `1.5`, field: "data.d", reason: `strict property 'd' expects Date32, got 1.5`},
		{prop: "d", value: `false`, field: "data.d", reason: `strict property 'd' expects Date32, got false`},
		// DateTime: integer ms or RFC 3339
		{prop: "dt", value: `"2024-01-01T00:00:00Z"`, want: `1704067200000`},
		{prop: "dt", value: `"2024-06-01T12:00:00.123+02:00"`, want: `1717236000123`},
		{prop: "dt", value: `-1`, want: `-1`},
		{prop: "dt", value: `9223372036854775807`, want: `9223372036854775807`},
		{prop: "dt", value: `"2024-01-01"`, field: "data.dt", reason: `invalid DateTime literal '2024-01-01'`},
		{prop: "dt", value: `9223372036854775808`, field: "data.dt", reason: `DateTime value out of range: 9223372036854775808`},
		{prop: "dt", value: `{}`, field: "data.dt", reason: `strict property 'dt' expects Date64, got {}`},
		// enum
		{prop: "e", value: `"a"`, want: `"a"`},
		{prop: "e", value: `"c"`, field: "data.e", reason: `invalid enum value 'c' for Thing.e (expected: a, b)`},
		{prop: "e", value: `3`, field: "data.e", reason: `strict property 'e' expects Utf8, got 3`},
		// Vector(3)
		{prop: "vec", value: `[1,-2.5,3e3]`, want: `[1,-2.5,3000]`},
		{prop: "vec", value: `[1,2]`, field: "data.vec", reason: `vector property 'vec' expects 3 dimensions, got 2`},
		{prop: "vec", value: `[1,"x",3]`, field: "data.vec[1]", reason: `vector property 'vec' elements must be numeric, got "x"`},
		{prop: "vec", value: `[1,2,null]`, field: "data.vec[2]", reason: `vector property 'vec' elements must be numeric, got null`},
		{prop: "vec", value: `[1,2,1e39]`, field: "data.vec[2]", reason: `vector element value 1000000000000000000000000000000000000000 exceeds Float32 range`},
		{prop: "vec", value: `"1,2,3"`, field: "data.vec", reason: `vector property 'vec' expects a JSON array, got "1,2,3"`},
		{prop: "rvec", value: `null`, field: "data.rvec", reason: `non-nullable vector property 'rvec' has null values`},
		// lists
		{prop: "ls", value: `[]`, want: `[]`},
		{prop: "ls", value: `["a","","ü"]`, want: `["a","","ü"]`},
		{prop: "ls", value: `["a",null]`, field: "data.ls[1]", reason: `strict list property 'ls' contains a null or invalid item`},
		{prop: "ls", value: `["a",1]`, field: "data.ls[1]", reason: `strict list property 'ls' contains a null or invalid item`},
		{prop: "ls", value: `"a"`, field: "data.ls", reason: `list property 'ls' expects a JSON array, got "a"`},
		{prop: "lb", value: `[true,false]`, want: `[true,false]`},
		{prop: "li32", value: `[1,2147483648]`, field: "data.li32[1]", reason: `list value 2147483648 exceeds Int32 range`},
		{prop: "li32", value: `[1.5]`, field: "data.li32[0]", reason: `strict list property 'li32' contains a null or invalid item`},
		{prop: "li64", value: `[-9223372036854775808,9223372036854775807]`, want: `[-9223372036854775808,9223372036854775807]`},
		{prop: "lu32", value: `[-1]`, field: "data.lu32[0]", reason: `list value -1 exceeds UInt32 range`},
		{prop: "lu64", value: `[18446744073709551615]`, want: `[18446744073709551615]`},
		{prop: "lf32", value: `[1e39]`, field: "data.lf32[0]", reason: `list value value 1000000000000000000000000000000000000000 exceeds Float32 range`},
		{prop: "lf64", value: `[0.5,-0.0]`, want: `[0.5,-0]`},
		{prop: "ld", value: `["2024-01-01",0]`, want: `[19723,0]`},
		{prop: "ld", value: `["nope"]`, field: "data.ld[0]", reason: `invalid Date literal 'nope'`},
		{prop: "ldt", value: `["2024-01-01T00:00:00Z"]`, want: `[1704067200000]`},
		{prop: "rlist", value: `null`, field: "data.rlist", reason: `non-nullable property 'rlist' has null or invalid values`},
		// Blob: managed base64 data only
		{prop: "blob", value: `"base64:aGVsbG8="`, want: `"base64:aGVsbG8="`},
		{prop: "blob", value: `"base64:"`, want: `"base64:"`},
		{prop: "blob", value: `"s3://bucket/x.pdf"`, field: "data.blob", reason: `external blob URI 's3://bucket/x.pdf' is not allowed`},
		{prop: "blob", value: `5`, field: "data.blob", reason: `blob property 'blob' must be a URI string or base64: prefixed data`},
		{prop: "blob", value: `"base64:aGVsbG8"`, field: "data.blob", reason: `invalid base64 blob data: illegal base64 data at input byte 4`},
		{prop: "blob", value: `"base64:aGVs\nbG8="`, field: "data.blob", reason: `invalid base64 blob data: line breaks are not base64`},
		{prop: "rblob", value: `null`, field: "data.rblob", reason: `non-nullable blob property 'rblob' has null values`},
		// non-nullable scalar
		{prop: "req", value: `null`, field: "data.req", reason: `non-nullable property 'req' has null or invalid values`},
		// nullable: null is stored as null
		{prop: "i32", value: `null`, want: `null`},
	}
	for _, c := range cases {
		t.Run(c.prop+"="+c.value, func(t *testing.T) {
			line := thingKV("x", c.prop, c.value)
			out, err := run(t, allTypes, Merge, Options{}, "", line)
			if c.reason != "" {
				wantInvalid(t, err, 2, c.field, c.reason)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := colJSON(t, out["node:Thing"], c.prop)[0]; got != c.want {
				t.Fatalf("stored %s, want %s", got, c.want)
			}
		})
	}
}

func TestMissingNonNullable(t *testing.T) {
	_, err := run(t, allTypes, Append, Options{}, `{"type":"Thing","data":{"name":"x","rvec":[1,2],"rblob":"base64:","rlist":[]}}`)
	wantInvalid(t, err, 1, "data.req", `non-nullable property 'req' has null or invalid values`)
	_, err = run(t, allTypes, Append, Options{}, `{"type":"Thing","data":{"name":"x","req":1,"rblob":"base64:","rlist":[]}}`)
	wantInvalid(t, err, 1, "data.rvec", `non-nullable vector property 'rvec' has null values`)
	// Nullable properties may be absent: they are stored as null.
	out := mustRun(t, allTypes, Append, thing("x", ""))
	if got := colJSON(t, out["node:Thing"], "ls")[0]; got != "null" {
		t.Fatalf("absent list stored as %s", got)
	}
}

// TestStringArrayBuffers: the ids and endpoints array, built straight into its buffers, holds
// every value (empty ones too) at its offsets, is a valid Arrow array, and gives its memory
// back to the allocator.
func TestStringArrayBuffers(t *testing.T) {
	for _, vals := range [][]string{nil, {""}, {"a", "", "bcd", ""}, {"p1-0", "p1-1", "ü→"}} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		a := stringArray(mem, len(vals), func(i int) string { return vals[i] })
		s := a.(*array.String)
		if err := s.ValidateFull(); err != nil {
			t.Fatalf("%q: %v", vals, err)
		}
		if s.Len() != len(vals) || s.NullN() != 0 {
			t.Fatalf("%q: len %d nulls %d", vals, s.Len(), s.NullN())
		}
		for i, v := range vals {
			if s.Value(i) != v {
				t.Fatalf("%q: value %d is %q", vals, i, s.Value(i))
			}
		}
		a.Release()
		mem.AssertSize(t, 0)
	}
}
