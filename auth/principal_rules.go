package auth

// ssl.principal.mapping.rules: Kafka's SslPrincipalMapper, which turns the
// subject of a client certificate (RFC 2253, as SubjectName writes it)
// into a principal name. The rules are a comma-separated list, tried in
// order; the first that matches names the principal:
//
//	DEFAULT                       the whole subject, "CN=alice,OU=eng,O=corp"
//	RULE:pattern/replacement/     if pattern matches the whole subject, the
//	RULE:pattern/replacement/L    subject with every match of pattern
//	RULE:pattern/replacement/U    replaced (Java's String.replaceAll), then
//	                              lower- or upper-cased
//
// The list is split and each rule parsed with Kafka's own two regular
// expressions, so what Kafka accepts or refuses is accepted or refused
// here (empty rules between commas are skipped; "\/" escapes a slash). A
// replacement names groups as Java does ($1, ${name}, \$ for a dollar),
// and a reference to a group the pattern does not have is kept literally,
// as Kafka keeps it. The one difference is the pattern's dialect: Go's
// RE2, not java.util.regex, so back references and look-around are
// refused when the rules are parsed.

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrPrincipalMappingRules is an ssl.principal.mapping.rules value Kafka
// would refuse, or a pattern RE2 cannot compile.
var ErrPrincipalMappingRules = errors.New("auth: ssl.principal.mapping.rules")

// ErrNoMatchingRule is a subject no rule matches (Kafka's NoMatchingRule):
// the client is not authenticated.
var ErrNoMatchingRule = errors.New("auth: no ssl.principal.mapping.rules rule applies")

// DefaultPrincipalMappingRules is Kafka's default: the subject as it is.
const DefaultPrincipalMappingRules = "DEFAULT"

// Java's regex classes, spelled for RE2: "." stops at Java's line
// terminators, \s is Java's ASCII whitespace (with \x0B), and $ also
// matches before a line terminator that ends the input (which trim leaves
// only when it is above U+0020).
const (
	javaDot        = `[^\n\r\x{85}\x{2028}\x{2029}]`
	javaSpace      = `[ \t\n\x0B\f\r]`
	javaDollar     = `(?:$|[\x{85}\x{2028}\x{2029}]$)`
	rulePatternRE2 = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`
)

var (
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + rulePatternRE2 + `)` + javaSpace + `*(,` + javaSpace + `*|` + javaDollar + `)`)
	ruleParser   = regexp.MustCompile(`\A(?:` + rulePatternRE2 + `)`) // lookingAt
	backRefer    = regexp.MustCompile(`\$([0-9]+)`)
)

// PrincipalMapper maps certificate subjects to principal names; the zero
// value has no rules and maps nothing.
type PrincipalMapper struct {
	rules []principalRule
}

type principalRule struct {
	isDefault                bool
	pattern, replacement     string
	whole, first, after      *regexp.Regexp // matches(); find from 0; find from a later index
	toLowerCase, toUpperCase bool
	groupCount               int
	groupNames               map[string]int
}

// ParsePrincipalMappingRules parses an ssl.principal.mapping.rules value.
func ParsePrincipalMappingRules(rules string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	for _, text := range splitRules(rules) {
		loc := ruleParser.FindStringSubmatchIndex(text)
		if loc == nil {
			return nil, fmt.Errorf("%w: invalid rule: %s", ErrPrincipalMappingRules, text)
		}
		if loc[1] != len(text) {
			return nil, fmt.Errorf("%w: invalid rule: `%s`, unmatched substring: `%s`", ErrPrincipalMappingRules, text, text[loc[1]:])
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return text[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, principalRule{isDefault: true})
			continue
		}
		pattern, ok := group(2)
		if !ok {
			continue // empty rules are ignored
		}
		replacement, _ := group(4)
		caseFlag, _ := group(6)
		rule, err := newPrincipalRule(pattern, replacement, caseFlag)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %q: %w", ErrPrincipalMappingRules, text, err)
		}
		m.rules = append(m.rules, rule)
	}
	return m, nil
}

// splitRules is Kafka's splitRules: the rules between commas, trimmed.
func splitRules(rules string) []string {
	rules = strings.TrimFunc(rules, func(r rune) bool { return r <= ' ' }) // Java's String.trim
	var out []string
	for _, match := range ruleSplitter.FindAllStringSubmatch(rules, -1) {
		out = append(out, match[1])
	}
	return out
}

func newPrincipalRule(pattern, replacement, caseFlag string) (principalRule, error) {
	r := principalRule{pattern: pattern, replacement: replacement, toLowerCase: caseFlag == "L", toUpperCase: caseFlag == "U"}
	var err error
	if r.first, err = regexp.Compile(pattern); err != nil {
		return r, err
	}
	r.whole = regexp.MustCompile(`\A(?:` + pattern + `)\z`)
	// One rune before the pattern gives a search from a later index the
	// context Java's find has (\b, ^ look at the rune before it).
	r.after = regexp.MustCompile(`(?s:.)(?:` + pattern + `)`)
	r.groupCount = r.first.NumSubexp()
	r.groupNames = map[string]int{}
	for i, name := range r.first.SubexpNames() {
		if name != "" {
			r.groupNames[name] = i
		}
	}
	return r, nil
}

// Name maps a subject (RFC 2253) to a principal name with the first rule
// that matches it.
func (m *PrincipalMapper) Name(subject string) (string, error) {
	for _, r := range m.rules {
		name, ok, err := r.apply(subject)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrPrincipalMappingRules, r, err)
		}
		if ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w to %s, rules %s", ErrNoMatchingRule, subject, m)
}

// String is Kafka's form of the rule list, "[RULE:p/r/L, DEFAULT]".
func (m *PrincipalMapper) String() string {
	texts := make([]string, len(m.rules))
	for i, r := range m.rules {
		texts[i] = r.String()
	}
	return "[" + strings.Join(texts, ", ") + "]"
}

func (r principalRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	text := "RULE:" + r.pattern + "/" + r.replacement
	if r.toLowerCase {
		text += "/L"
	} else if r.toUpperCase {
		text += "/U"
	}
	return text
}

func (r principalRule) apply(subject string) (string, bool, error) {
	if r.isDefault {
		return subject, true, nil
	}
	if !r.whole.MatchString(subject) {
		return "", false, nil
	}
	replacement, err := escapeLiteralBackReferences(r.replacement, r.groupCount)
	if err != nil {
		return "", false, err
	}
	result, err := r.replaceAll(subject, replacement)
	if err != nil {
		return "", false, err
	}
	if r.toLowerCase {
		result = strings.ToLower(result)
	} else if r.toUpperCase {
		result = strings.ToUpper(result)
	}
	return result, true, nil
}

// replaceAll is Java's Matcher.replaceAll: each match from where the last
// ended is replaced; after an empty match the search moves one character
// on, and an empty match right after a non-empty one counts (RE2's
// ReplaceAll skips it, Java's does not).
func (r principalRule) replaceAll(s, replacement string) (string, error) {
	var out strings.Builder
	tail := 0
	for from := 0; from <= len(s); {
		match := r.find(s, from)
		if match == nil {
			break
		}
		out.WriteString(s[tail:match[0]])
		if err := r.appendReplacement(&out, s, match, replacement); err != nil {
			return "", err
		}
		tail = match[1]
		if match[0] != match[1] {
			from = match[1]
			continue
		}
		if match[1] == len(s) {
			break
		}
		_, width := utf8.DecodeRuneInString(s[match[1]:])
		from = match[1] + width
	}
	out.WriteString(s[tail:])
	return out.String(), nil
}

// find is the first match starting at from or later, with the context
// of the whole string; nil when there is none.
func (r principalRule) find(s string, from int) []int {
	if from == 0 {
		return r.first.FindStringSubmatchIndex(s)
	}
	_, width := utf8.DecodeLastRuneInString(s[:from])
	before := from - width
	match := r.after.FindStringSubmatchIndex(s[before:])
	if match == nil {
		return nil
	}
	_, skip := utf8.DecodeRuneInString(s[before+match[0]:])
	match[0] += skip // the pattern's match starts after the rune before it
	for i := range match {
		if match[i] >= 0 {
			match[i] += before
		}
	}
	return match
}

// appendReplacement is Java's Matcher.appendReplacement for one match.
func (r principalRule) appendReplacement(out *strings.Builder, s string, match []int, replacement string) error {
	for cursor := 0; cursor < len(replacement); {
		c := replacement[cursor]
		switch c {
		case '\\':
			cursor++
			if cursor == len(replacement) {
				return errors.New("character to be escaped is missing")
			}
			_, width := utf8.DecodeRuneInString(replacement[cursor:])
			out.WriteString(replacement[cursor : cursor+width])
			cursor += width
			continue
		case '$':
		default:
			out.WriteByte(c)
			cursor++
			continue
		}
		cursor++
		if cursor == len(replacement) {
			return errors.New("illegal group reference: group index is missing")
		}
		group := -1
		if replacement[cursor] == '{' {
			cursor++
			start := cursor
			for cursor < len(replacement) && isASCIIAlphanumeric(replacement[cursor]) {
				cursor++
			}
			name := replacement[start:cursor]
			switch {
			case name == "":
				return errors.New("named capturing group has 0 length name")
			case cursor == len(replacement) || replacement[cursor] != '}':
				return errors.New("named capturing group is missing trailing '}'")
			case name[0] >= '0' && name[0] <= '9':
				return fmt.Errorf("capturing group name {%s} starts with digit character", name)
			}
			index, ok := r.groupNames[name]
			if !ok {
				return fmt.Errorf("no group with name {%s}", name)
			}
			group = index
			cursor++
		} else {
			digit := int(replacement[cursor]) - '0'
			if digit < 0 || digit > 9 {
				return errors.New("illegal group reference")
			}
			group = digit
			cursor++
			for cursor < len(replacement) { // the longest group number that exists
				digit := int(replacement[cursor]) - '0'
				if digit < 0 || digit > 9 || group*10+digit > r.groupCount {
					break
				}
				group = group*10 + digit
				cursor++
			}
		}
		if group > r.groupCount {
			return fmt.Errorf("no group %d", group)
		}
		if match[2*group] >= 0 {
			out.WriteString(s[match[2*group]:match[2*group+1]])
		}
	}
	return nil
}

func isASCIIAlphanumeric(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// escapeLiteralBackReferences is Kafka's (from Apache NiFi): a $N whose
// group does not exist, even after dropping trailing digits, gets a
// backslash so it stays literal. Like Kafka's, it finds the references in
// the original text and inserts at those indexes in the text it is
// changing, and does nothing when the pattern has no groups.
func escapeLiteralBackReferences(unescaped string, groupCount int) (string, error) {
	if groupCount == 0 {
		return unescaped, nil
	}
	value := unescaped
	for _, loc := range backRefer.FindAllStringSubmatchIndex(unescaped, -1) {
		number := unescaped[loc[2]:loc[3]]
		if strings.HasPrefix(number, "0") {
			continue
		}
		index, err := strconv.ParseInt(number, 10, 32) // Integer.parseInt
		if err != nil {
			return "", fmt.Errorf("for input string: %q", number)
		}
		for index > int64(groupCount) && index >= 10 {
			index /= 10
		}
		if index > int64(groupCount) {
			groupStart := loc[2]
			value = value[:groupStart-1] + `\` + value[groupStart-1:]
		}
	}
	return value, nil
}
