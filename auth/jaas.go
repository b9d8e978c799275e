package auth

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Kafka's sasl.jaas.config: one JAAS login module entry, as Kafka's
// JaasConfig reads it with a java.io.StreamTokenizer:
//
//	entry   = class flag { option } ";"
//	class   = word                      (org.apache.kafka...PlainLoginModule)
//	flag    = "required" | "requisite" | "sufficient" | "optional"
//	option  = word "=" ( word | quoted )
//	word    = 1*( letter | digit | "." | "-" | "_" | "$" )
//	quoted  = '"' { char | "\" char } '"'   (\n, \t, \r, \b, \f, \" and \\ as Java)
//
// White space separates tokens; text after the ";" is an error (a
// client's entry names one login module), as is an option given twice.
// The values are secrets: an error says where the text went wrong, never
// what it holds.

// JAASEntry is one parsed login module entry.
type JAASEntry struct {
	LoginModule string            // the class name
	Flag        string            // required, requisite, sufficient or optional
	Options     map[string]string // key to value, at most jaasOptionsMax
}

// jaasOptionsMax bounds the options of an entry.
const jaasOptionsMax = 64

// ErrJAAS is wrapped by every sasl.jaas.config parse error.
var ErrJAAS = errors.New("auth: sasl.jaas.config")

// ParseJAAS parses a sasl.jaas.config value.
func ParseJAAS(text string) (JAASEntry, error) {
	p := jaasParser{text: text}
	var e JAASEntry
	var ok bool
	if e.LoginModule, ok = p.word(); !ok {
		return JAASEntry{}, p.fail("want a login module class")
	}
	if e.Flag, ok = p.word(); !ok || !slices.Contains([]string{"required", "requisite", "sufficient", "optional"}, e.Flag) {
		return JAASEntry{}, p.fail("want a control flag (required, requisite, sufficient or optional)")
	}
	e.Options = map[string]string{}
	for {
		if p.skipSpace(); p.at(';') {
			p.pos++
			break
		}
		key, ok := p.word()
		if !ok {
			return JAASEntry{}, p.fail("want an option name or ';'")
		}
		if p.skipSpace(); !p.at('=') {
			return JAASEntry{}, p.fail("want '=' after an option name")
		}
		p.pos++
		value, ok := p.value()
		if !ok {
			return JAASEntry{}, p.fail("want an option value (a word or a quoted string)")
		}
		if _, dup := e.Options[key]; dup || len(e.Options) == jaasOptionsMax {
			return JAASEntry{}, p.fail(fmt.Sprintf("an option given twice, or more than %d options", jaasOptionsMax))
		}
		e.Options[key] = value
	}
	if p.skipSpace(); p.pos != len(p.text) {
		return JAASEntry{}, p.fail("want one login module entry, ended by ';'")
	}
	return e, nil
}

// String formats the entry so that ParseJAAS reads it back: options in
// key order, every value quoted.
func (e JAASEntry) String() string {
	var b strings.Builder
	b.WriteString(e.LoginModule + " " + e.Flag)
	for _, key := range slices.Sorted(maps.Keys(e.Options)) {
		b.WriteString(" " + key + "=" + quoteJAAS(e.Options[key]))
	}
	b.WriteString(";")
	return b.String()
}

func quoteJAAS(value string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

type jaasParser struct {
	text string
	pos  int
}

func (p *jaasParser) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %s", ErrJAAS, what, strconv.Itoa(p.pos))
}

func (p *jaasParser) at(c byte) bool { return p.pos < len(p.text) && p.text[p.pos] == c }

func (p *jaasParser) skipSpace() {
	for p.pos < len(p.text) && strings.IndexByte(" \t\r\n\f", p.text[p.pos]) >= 0 {
		p.pos++
	}
}

func isJAASWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_' || c == '$'
}

// word reads a word after white space.
func (p *jaasParser) word() (string, bool) {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.text) && isJAASWordByte(p.text[p.pos]) {
		p.pos++
	}
	return p.text[start:p.pos], p.pos > start
}

// value reads a word or a quoted string after white space.
func (p *jaasParser) value() (string, bool) {
	if p.skipSpace(); !p.at('"') {
		return p.word()
	}
	p.pos++
	var b strings.Builder
	for p.pos < len(p.text) {
		c := p.text[p.pos]
		p.pos++
		switch c {
		case '"':
			return b.String(), true
		case '\\':
			if p.pos == len(p.text) {
				return "", false
			}
			escaped := p.text[p.pos]
			p.pos++
			if i := strings.IndexByte("ntrbf", escaped); i >= 0 {
				escaped = "\n\t\r\b\f"[i]
			}
			b.WriteByte(escaped)
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}
