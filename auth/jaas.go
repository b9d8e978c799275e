package auth

import (
	"fmt"
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
// what it holds. Kafka's server takes the PLAIN users from a
// PlainLoginModule entry's user_<name>="<password>" options (PlainUsers);
// clients take username and password.

// Login module classes of Kafka's mechanisms.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// JAASConfig is one parsed login module entry.
type JAASConfig struct {
	LoginModule string            // the class name
	Flag        string            // required, requisite, sufficient or optional
	Options     map[string]string // key to value, at most jaasOptionsMax
}

// jaasOptionsMax bounds the options of an entry (a server's PLAIN users
// are options).
const jaasOptionsMax = 10_000

// ParseJAAS parses a sasl.jaas.config value.
func ParseJAAS(text string) (JAASConfig, error) {
	p := jaasParser{text: text}
	var e JAASConfig
	var ok bool
	if e.LoginModule, ok = p.word(); !ok {
		return JAASConfig{}, p.fail("want a login module class")
	}
	if e.Flag, ok = p.word(); !ok || !slices.Contains([]string{"required", "requisite", "sufficient", "optional"}, e.Flag) {
		return JAASConfig{}, p.fail("want a control flag (required, requisite, sufficient or optional)")
	}
	e.Options = map[string]string{}
	for {
		if p.skipSpace(); p.at(';') {
			p.pos++
			break
		}
		key, ok := p.word()
		if !ok {
			return JAASConfig{}, p.fail("want an option name or ';'")
		}
		if p.skipSpace(); !p.at('=') {
			return JAASConfig{}, p.fail("want '=' after an option name")
		}
		p.pos++
		value, ok := p.value()
		if !ok {
			return JAASConfig{}, p.fail("want an option value (a word or a quoted string)")
		}
		if _, dup := e.Options[key]; dup || len(e.Options) == jaasOptionsMax {
			return JAASConfig{}, p.fail(fmt.Sprintf("an option given twice, or more than %d options", jaasOptionsMax))
		}
		e.Options[key] = value
	}
	if p.skipSpace(); p.pos != len(p.text) {
		return JAASConfig{}, p.fail("want one login module entry, ended by ';'")
	}
	return e, nil
}

// String formats the entry so that ParseJAAS reads it back: options in
// key order, every value quoted.
func (e JAASConfig) String() string {
	var b strings.Builder
	b.WriteString(e.LoginModule + " " + e.Flag)
	keys := make([]string, 0, len(e.Options))
	for key := range e.Options {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
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

// PlainUsers returns the users of a PlainLoginModule entry: its
// user_<name>="<password>" options.
func PlainUsers(c JAASConfig) (map[string]string, error) {
	if c.LoginModule != PlainLoginModule {
		return nil, fmt.Errorf("%w: PLAIN needs %s, not %s", ErrJAAS, PlainLoginModule, c.LoginModule)
	}
	users := map[string]string{}
	for key, value := range c.Options {
		if name, ok := strings.CutPrefix(key, "user_"); ok && name != "" {
			users[name] = value
		}
	}
	return users, nil
}
