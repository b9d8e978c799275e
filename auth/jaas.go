package auth

// Kafka's sasl.jaas.config: one JAAS login module entry,
//
//	<login module class> <flag> [<option>=<value> ...];
//
// flag one of required, requisite, sufficient, optional; a value is a
// word or a "quoted" string (\" and \\ escape inside it), as Kafka's
// JaasConfig reads it with a StreamTokenizer. Kafka's server takes the
// PLAIN users from a PlainLoginModule entry's user_<name>="<password>"
// options.

import (
	"fmt"
	"strings"
	"unicode"
)

// Login module classes of Kafka's server mechanisms.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// JAASConfig is one login module entry.
type JAASConfig struct {
	LoginModule string
	Flag        string
	Options     map[string]string
}

// jaasOptionsMax bounds the options of one entry.
const jaasOptionsMax = 10_000

// ParseJAAS parses a sasl.jaas.config holding one login module entry.
func ParseJAAS(text string) (JAASConfig, error) {
	tokens, err := jaasTokens(text)
	if err != nil {
		return JAASConfig{}, err
	}
	if len(tokens) < 3 || tokens[len(tokens)-1] != ";" {
		return JAASConfig{}, fmt.Errorf("%w: want `<LoginModule> <flag> [option=value ...];`", ErrJAAS)
	}
	c := JAASConfig{LoginModule: tokens[0], Flag: tokens[1], Options: map[string]string{}}
	switch c.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return c, fmt.Errorf("%w: login module control flag %q is not required, requisite, sufficient or optional", ErrJAAS, c.Flag)
	}
	options := tokens[2 : len(tokens)-1]
	for i := 0; i < len(options); i += 3 {
		if i+2 >= len(options) || options[i+1] != "=" || options[i] == "=" || options[i] == ";" || options[i+2] == ";" {
			return c, fmt.Errorf("%w: want option=value after %s (one login module entry only)", ErrJAAS, c.LoginModule)
		}
		if len(c.Options) >= jaasOptionsMax {
			return c, fmt.Errorf("%w: more than %d options", ErrJAAS, jaasOptionsMax)
		}
		c.Options[options[i]] = options[i+2]
	}
	return c, nil
}

// jaasTokens splits a JAAS entry into words, quoted strings (unquoted),
// "=" and ";".
func jaasTokens(text string) ([]string, error) {
	var tokens []string
	runes := []rune(text)
	for i := 0; i < len(runes); {
		r := runes[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '=' || r == ';':
			tokens = append(tokens, string(r))
			i++
		case r == '"':
			var b strings.Builder
			i++
			for ; i < len(runes) && runes[i] != '"'; i++ {
				if runes[i] == '\\' && i+1 < len(runes) {
					i++
				}
				b.WriteRune(runes[i])
			}
			if i >= len(runes) {
				return nil, fmt.Errorf("%w: unterminated quoted string", ErrJAAS)
			}
			tokens = append(tokens, b.String())
			i++
		default:
			start := i
			for i < len(runes) && !unicode.IsSpace(runes[i]) && runes[i] != '=' && runes[i] != ';' && runes[i] != '"' {
				i++
			}
			tokens = append(tokens, string(runes[start:i]))
		}
	}
	return tokens, nil
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
