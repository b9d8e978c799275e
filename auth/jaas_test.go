package auth

import (
	"errors"
	"maps"
	"regexp"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	const plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
	for _, c := range []struct {
		name, text string
		want       JAASEntry // LoginModule "" for an error
	}{
		{"kafka's example", plain + ` required username="alice" password="alice-secret";`,
			JAASEntry{plain, "required", map[string]string{"username": "alice", "password": "alice-secret"}}},
		{"unquoted words, new lines", plain + " required\n  username=alice\n  password=p-4.s$s_;\n",
			JAASEntry{plain, "required", map[string]string{"username": "alice", "password": "p-4.s$s_"}}},
		{"escapes and semicolons in quotes", plain + ` optional username="a\"b" password="x;y\\z\n=";`,
			JAASEntry{plain, "optional", map[string]string{"username": `a"b`, "password": "x;y\\z\n="}}},
		{"no options", plain + " required;", JAASEntry{plain, "required", map[string]string{}}},
		{"empty quoted value", plain + ` required password="";`, JAASEntry{plain, "required", map[string]string{"password": ""}}},
		{"no semicolon", plain + ` required username="alice"`, JAASEntry{}},
		{"no flag", plain + ` username="alice";`, JAASEntry{}},
		{"unknown flag", plain + ` mandatory username="alice";`, JAASEntry{}},
		{"unclosed quote", plain + ` required password="secret;`, JAASEntry{}},
		{"two entries", plain + ` required; ` + plain + ` required;`, JAASEntry{}},
		{"option twice", plain + ` required password=a password=b;`, JAASEntry{}},
		{"no value", plain + ` required password=;`, JAASEntry{}},
		{"empty", "", JAASEntry{}},
	} {
		got, err := ParseJAAS(c.text)
		if c.want.LoginModule == "" {
			if !errors.Is(err, ErrJAAS) {
				t.Errorf("%s: %+v, %v; want an error", c.name, got, err)
			} else if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "alice") {
				t.Errorf("%s: the error %q shows the value", c.name, err)
			}
			continue
		}
		if err != nil || got.LoginModule != c.want.LoginModule || got.Flag != c.want.Flag || !maps.Equal(got.Options, c.want.Options) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// jaasErrorShape is every parse error: a fixed sentence and a byte
// offset, never a piece of the input.
var jaasErrorShape = regexp.MustCompile(`^auth: sasl\.jaas\.config: [a-zA-Z0-9 ,;'=()]+ at byte [0-9]+$`)

// FuzzParseJAAS: an entry that parses formats to text that parses to the
// same entry; an error is a fixed sentence with an offset within the
// input, never the input's text (it holds secrets).
func FuzzParseJAAS(f *testing.F) {
	for _, seed := range []string{
		`org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a\"b;c";`,
		"x optional a=b c=\"d\\ne\";", `x required`, `x required a="`, `x required a=b; y`, "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		e, err := ParseJAAS(text)
		if err != nil {
			if !jaasErrorShape.MatchString(err.Error()) {
				t.Fatalf("error %q is not a fixed sentence with an offset", err)
			}
			return
		}
		again, err := ParseJAAS(e.String())
		if err != nil || again.LoginModule != e.LoginModule || again.Flag != e.Flag || !maps.Equal(again.Options, e.Options) {
			t.Fatalf("%q formats to %q, which parses to %+v, %v", text, e.String(), again, err)
		}
	})
}
