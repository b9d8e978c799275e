package mirrord

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       map[string]string
	}{
		{"separators", "a=1\nb:2\nd\t=\t4\ne   :  5\n", map[string]string{"a": "1", "b": "2", "d": "4", "e": "5"}},
		{"comments and blanks", "# a=1\n  ! b=2\n\n   \nc=3\n", map[string]string{"c": "3"}},
		{"value keeps trailing space and later separators", "a = x = y : z  \n", map[string]string{"a": "x = y : z  "}},
		{"only one separator skipped", "a==b\nc :=d\n", map[string]string{"a": "=b", "c": "=d"}},
		{"empty value", "empty=\n", map[string]string{"empty": ""}},
		{"continuation", "servers=a:1,\\\n    b:2,\\\n\tc:3\nnext=1\n", map[string]string{"servers": "a:1,b:2,c:3", "next": "1"}},
		{"even backslashes do not continue", "a=x\\\\\nb=y\n", map[string]string{"a": `x\`, "b": "y"}},
		{"continuation of a comment-looking line", "a=1\\\n#not a comment\n", map[string]string{"a": "1#not a comment"}},
		{"comment does not continue", "#c\\\na=1\n", map[string]string{"a": "1"}},
		{"last line continues into nothing", "a=1\\", map[string]string{"a": "1"}},
		{"escapes", `k\=e\:y\ x=t\tn\nr\rf\f\q\\` + "\n", map[string]string{"k=e:y x": "t\tn\nr\rf\fq\\"}},
		{"unicode", `a=\u00e9\u20AC\uD83D\uDE00 é` + "\n", map[string]string{"a": "é€😀 é"}},
		{"line endings", "a=1\r\nb=2\rc=3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"last value wins", "a=1\na=2\n", map[string]string{"a": "2"}},
		{"escaped hash starts a key", `\#a=1` + "\n", map[string]string{"#a": "1"}},
	} {
		got, err := ParseProperties(tc.text)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestParsePropertiesRefusesJunk: a line that is not key=value (or
// key:value) is named, not read as a key without a value.
func TestParsePropertiesRefusesJunk(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"bootstrap.servers=a:9092\nthis is not a setting\n", `line 2: "this is not a setting" is not key=value`},
		{"alone\n", `line 1: "alone" is not key=value`},
		{"a=1\nc 3\n", `line 2: "c 3" is not key=value`},
		{"a=1\n\n=v\n", `line 3: "=v" has no key`},
	} {
		_, err := ParseProperties(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}

func TestParsePropertiesRefusesMalformedUnicode(t *testing.T) {
	for _, text := range []string{"a=\\u12", "ok=1\nb=\\uzzzz\n", "\\u00g1=x"} {
		_, err := ParseProperties(text)
		if err == nil || !strings.Contains(err.Error(), "malformed \\uxxxx") {
			t.Errorf("%q: %v", text, err)
		}
	}
	if _, err := ParseProperties("ok=1\nb=\\u12\n"); err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Errorf("line number: %v", err)
	}
}

// formatProperties writes properties with every special character
// escaped, one per line, as a writer of the format may.
func formatProperties(properties map[string]string) string {
	escape := func(s string) string {
		var out strings.Builder
		for _, c := range []byte(s) {
			switch c {
			case '\n':
				out.WriteString(`\n`)
			case '\r':
				out.WriteString(`\r`)
			case '\t':
				out.WriteString(`\t`)
			case '\f':
				out.WriteString(`\f`)
			case '\\', '=', ':', '#', '!', ' ':
				out.WriteByte('\\')
				out.WriteByte(c)
			default:
				out.WriteByte(c)
			}
		}
		return out.String()
	}
	var out strings.Builder
	for _, key := range slices.Sorted(maps.Keys(properties)) {
		out.WriteString(escape(key) + "=" + escape(properties[key]) + "\n")
	}
	return out.String()
}

// FuzzParseProperties: no panic, and what parses re-reads the same once
// written out again.
func FuzzParseProperties(f *testing.F) {
	for _, seed := range []string{"a=1\nb:2\nc 3\n", "# c\n! c\nk\\=1=v\\\n  w\n", `a=\u00e9\uD83D\uDE00`, "a=\\u12", "a\r\nb\rc\\", "=\n:\n \\ \n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		properties, err := ParseProperties(text)
		if err != nil {
			return
		}
		again, err := ParseProperties(formatProperties(properties))
		if err != nil || !reflect.DeepEqual(again, properties) {
			t.Fatalf("%q parsed as %q, rewritten as %q: %q, %v", text, properties, formatProperties(properties), again, err)
		}
	})
}
