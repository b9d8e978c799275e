package mirrord

// A reader of Java properties files (java.util.Properties.load), the
// format of Kafka's config files (server.properties, the mirror configs
// of `mirrord mirrors --create`, --command-config):
//
//   - Natural lines end at \n, \r or \r\n. Leading spaces, tabs and form
//     feeds are skipped. A line that is then empty, or starts with # or !,
//     is a comment (a comment never continues).
//   - A line ending in an odd number of backslashes continues on the next
//     one: the backslash and the next line's leading white space go.
//   - The key runs to the first unescaped '=', ':' or white space; then
//     white space, at most one '=' or ':', and white space are skipped;
//     the rest, trailing white space included, is the value. So
//     "key=value" and "key: value" are the same.
//   - Unlike Java, a line without an unescaped '=' or ':' ("key value",
//     "key" alone, a stray word) or with an empty key is an error naming
//     the line: in a config file it is a mistake, not a setting.
//   - Escapes in keys and values: \t \n \r \f, \uXXXX (UTF-16, surrogate
//     pairs joined), and \ before any other character stands for it
//     ("\=" "\:" "\ " "\#" "\\"). A malformed \u is an error naming the
//     line, as Java refuses it.
//   - A key given twice keeps its last value.
//
// One difference: Java reads the bytes as ISO-8859-1, this reader as
// UTF-8, so non-ASCII text written without \u escapes reads as written.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf16"
)

// propertiesLinesMax bounds the natural lines of a properties file.
const propertiesLinesMax = 1 << 20

// LoadProperties reads the properties file at path: a server.properties
// for Config.Properties, or a mirror config for Admin.CreateMirror.
func LoadProperties(path string) (map[string]string, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mirrord: %w", err)
	}
	props, err := ParseProperties(string(text))
	if err != nil {
		return nil, fmt.Errorf("mirrord: %s: %w", path, err)
	}
	return props, nil
}

// ParseProperties reads a properties file's text as Java's
// Properties.load does (key=value or key: value, # and ! comments,
// backslash continuations and escapes, the last of a key given twice
// winning), except that a line with no '=' or ':' or an empty key, and a
// malformed \u escape, are errors naming the line, and the text is
// UTF-8.
func ParseProperties(text string) (map[string]string, error) {
	lines := splitNaturalLines(text)
	if len(lines) > propertiesLinesMax {
		return nil, fmt.Errorf("%d lines: more than %d", len(lines), propertiesLinesMax)
	}
	properties := map[string]string{}
	for i := 0; i < len(lines); i++ {
		first := i + 1 // the line number errors name
		line := trimLeadingSpace(lines[i])
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continues(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + trimLeadingSpace(lines[i])
		}
		if continues(line) {
			line = line[:len(line)-1] // a last line ending in a backslash
		}
		key, value, err := splitProperty(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", first, err)
		}
		if key == "" {
			return nil, fmt.Errorf("line %d: %q has no key before its '='", first, line)
		}
		properties[key] = value
	}
	return properties, nil
}

// splitNaturalLines splits text at \n, \r and \r\n.
func splitNaturalLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	return strings.Split(text, "\n")
}

func isPropertiesSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeadingSpace(s string) string {
	for len(s) > 0 && isPropertiesSpace(s[0]) {
		s = s[1:]
	}
	return s
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for n < len(line) && line[len(line)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line into its unescaped key and value;
// a line without an '=' or ':' separator is an error.
func splitProperty(line string) (string, string, error) {
	keyEnd, valueStart, separated := len(line), len(line), false
	escaped := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !escaped && (c == '=' || c == ':' || isPropertiesSpace(c)) {
			keyEnd, valueStart, separated = i, i+1, c == '=' || c == ':'
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isPropertiesSpace(c) {
			if separated || (c != '=' && c != ':') {
				break
			}
			separated = true
		}
		valueStart++
	}
	if !separated {
		return "", "", fmt.Errorf("%q is not key=value", line)
	}
	key, err := unescapeProperty(line[:keyEnd])
	if err != nil {
		return "", "", err
	}
	value, err := unescapeProperty(line[valueStart:])
	return key, value, err
}

// unescapeProperty replaces the escapes of a key or value.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var out strings.Builder
	var units []uint16 // UTF-16 code units of consecutive \u escapes
	flush := func() {
		out.WriteString(string(utf16.Decode(units)))
		units = units[:0]
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			flush()
			out.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == 'u' {
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx encoding in %q", s)
			}
			unit, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx encoding in %q", s)
			}
			units = append(units, uint16(unit))
			i += 4
			continue
		}
		flush()
		out.WriteByte(unescapedByte(s[i]))
	}
	flush()
	return out.String(), nil
}

// unescapedByte is what \c stands for.
func unescapedByte(c byte) byte {
	switch c {
	case 't':
		return '\t'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 'f':
		return '\f'
	}
	return c
}
