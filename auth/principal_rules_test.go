package auth

import (
	"errors"
	"strings"
	"testing"
)

// The cases of Kafka's SslPrincipalMapperTest and more, each with what
// Kafka 4.4's SslPrincipalMapper (kafka-clients-4.4.0.jar on OpenJDK 17)
// answered: the rule list (its toString), the principal name, or a
// failure.

const (
	refused = "!refused" // Kafka threw (IllegalArgumentException, PatternSyntaxException, ...)
	noRule  = "!noRule"  // Kafka threw NoMatchingRule
)

type splitCase struct{ rules, want string }

type mapCase struct{ rules, subject, want string }

const kafkaTestRules = `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT`

var splitCases = []splitCase{
	{"DEFAULT", "[DEFAULT]"},
	{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1]"},
	{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT]"},
	{"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/", "[RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2]"},
	{"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "[RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L]"},
	{"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "[RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U]"},
	{"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "[RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1]"},
	{"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/", "[RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1]"},
	{"default", refused},
	{"DEFAUL", refused},
	{"DEFAULT/L", refused},
	{"DEFAULT/U", refused},
	{"RULE:CN=(.*?),OU=ServiceUsers.*/$1", refused},
	{"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", refused},
	{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", refused},
	{"RULE:^CN=(.*?),OU=ServiceUsers.*$/L", refused},
	{"RULE:^CN=(.*?),OU=ServiceUsers.*$/U", refused},
	{"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", refused},
	{"", "[]"},
	{"RULE://", "[RULE:/]"},
	{"RULE:/.*/", "[RULE:/.*]"},
	{"RULE:/.*/L", "[RULE:/.*/L]"},
	{"RULE://,DEFAULT", "[RULE:/, DEFAULT]"},
	{"  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"},
	{"  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"},
	{"  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"},
	{"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"},
	{",   , , ,      , , ,   ", "[]"},
	{",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"},
	{",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"},
	{"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"},
	{`RULE:\/\\\(\)\n\t/\/\//`, "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"},
	{`RULE:\**\/+/*/L,RULE:\/*\**/**/`, "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"},
	{`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`, "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]"},
	{kafkaTestRules, "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT]"},
	{"DEFAULT\u2028", "[DEFAULT]"},
	{"DEFAULT\u2028,DEFAULT", "[DEFAULT]"},
	{"RULE:a\rb/c/", "[RULE:a\rb/c]"},
	{"DEFAULT\x0b,\x0bDEFAULT", "[DEFAULT, DEFAULT]"},
	{"RULE:a/b/Lxyz", refused},
	{"RULE:a/b/ L", refused},
	{"RULE:(a/b/", refused},
}

var mapCases = []mapCase{
	{kafkaTestRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
	{kafkaTestRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
	{kafkaTestRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
	{kafkaTestRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
	{kafkaTestRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
	{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, "Tkac\\, Adam"},
	{"RULE:^CN=(.*?),.*$/$1$2/", "CN=alice,OU=eng", "alice$2"},
	{"RULE:^CN=(.*?),.*$/$12/", "CN=alice,OU=eng", "alice2"},
	{"RULE:^CN=(.*?),.*$/$0!/", "CN=alice,OU=eng", "CN=alice,OU=eng!"},
	{"RULE:^CN=(.*?),.*$/$9$1$99/", "CN=alice,OU=eng", refused},
	{"RULE:^CN=[a-z]+,.*$/$1/", "CN=alice,OU=eng", refused},
	{"RULE:^CN=(?<user>[a-z]+),.*$/${user}/U", "CN=alice,OU=eng", "ALICE"},
	{"RULE:^CN=(?<user>[a-z]+),.*$/${nope}/", "CN=alice,OU=eng", refused},
	{`RULE:^CN=([a-z]+),.*$/\$1 \\ $1/`, "CN=alice,OU=eng", "$1 \\ alice"},
	{`RULE:^CN=([a-z]+),.*$/$1\/`, "CN=alice,OU=eng", refused},
	{"RULE:^CN=([a-z]+),.*$/$1$/", "CN=alice,OU=eng", refused},
	{"RULE:^CN=([a-z]+),.*$/$x/", "CN=alice,OU=eng", refused},
	{"RULE:^CN=([a-z]+),.*$/$99999999999/", "CN=alice,OU=eng", refused},
	{"RULE:.*/x/", "CN=alice", "xx"},
	{"RULE:(.*)/$1@corp/", "CN=alice", "CN=alice@corp@corp"},
	{"RULE:a*/-/", "baaac", noRule},
	{"RULE:.*?/-/", "abc", "-a-b-c-"},
	{`RULE:\b/|/`, "CN=a b", noRule},
	{"RULE:[a-z0-9]*/<$0>/", "ab1cd", "<ab1cd><>"},
	{"RULE:^O=.*$/x/", "CN=alice,O=corp", noRule},
	{"RULE:^O=.*$/x/", "", noRule},
	{"", "CN=alice", noRule},
	{"RULE:^CN=(.*)$/$1/L", "CN=ÀLICE", "\u00e0lice"},
	{"RULE:(?i)^cn=(.*)$/$1/", "CN=alice", "alice"},
	{"RULE:^CN=([^,]+)(,.*|$)/$1/,DEFAULT", "CN=alice", "alice"},
	{"RULE:^CN=([^,]+)(,.*|$)/$1$2/,DEFAULT", "CN=alice", "alice"},
}

func TestPrincipalMappingRulesParse(t *testing.T) {
	for _, c := range splitCases {
		m, err := ParsePrincipalMappingRules(c.rules)
		switch {
		case c.want == refused:
			if !errors.Is(err, ErrPrincipalMappingRules) {
				t.Errorf("%q: %v, %v; want refused", c.rules, m, err)
			}
		case err != nil || m.String() != c.want:
			t.Errorf("%q: %v, %v; want %s", c.rules, m, err, c.want)
		}
	}
}

func TestPrincipalMappingRulesName(t *testing.T) {
	for _, c := range mapCases {
		m, err := ParsePrincipalMappingRules(c.rules)
		name := ""
		if err == nil {
			name, err = m.Name(c.subject)
		}
		switch c.want {
		case refused:
			if !errors.Is(err, ErrPrincipalMappingRules) {
				t.Errorf("%q on %q: %q, %v; want refused", c.rules, c.subject, name, err)
			}
		case noRule:
			if !errors.Is(err, ErrNoMatchingRule) {
				t.Errorf("%q on %q: %q, %v; want no matching rule", c.rules, c.subject, name, err)
			}
		default:
			if err != nil || name != c.want {
				t.Errorf("%q on %q: %q, %v; want %q", c.rules, c.subject, name, err, c.want)
			}
		}
	}
}

// FuzzPrincipalMappingRules: parsing and mapping never panic; rules that
// parse still parse with DEFAULT after them, one rule longer, and then
// every subject has a name (DEFAULT always applies); mapping is
// deterministic.
func FuzzPrincipalMappingRules(f *testing.F) {
	for _, c := range mapCases {
		f.Add(c.rules, c.subject)
	}
	for _, c := range splitCases {
		f.Add(c.rules, "CN=alice,OU=eng,O=corp")
	}
	f.Fuzz(func(t *testing.T, rules, subject string) {
		m, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			if !errors.Is(err, ErrPrincipalMappingRules) {
				t.Fatalf("%q: %v is not ErrPrincipalMappingRules", rules, err)
			}
			return
		}
		if len(m.rules) > strings.Count(rules, ",")+1 {
			t.Fatalf("%q: %d rules from %d commas", rules, len(m.rules), strings.Count(rules, ","))
		}
		name, err := m.Name(subject)
		again, errAgain := m.Name(subject)
		if name != again || (err == nil) != (errAgain == nil) {
			t.Fatalf("%q on %q: %q, %v then %q, %v", rules, subject, name, err, again, errAgain)
		}
		if err != nil && !errors.Is(err, ErrNoMatchingRule) && !errors.Is(err, ErrPrincipalMappingRules) {
			t.Fatalf("%q on %q: %v", rules, subject, err)
		}
		withDefault, err := ParsePrincipalMappingRules(rules + ",DEFAULT")
		if err != nil {
			return // the last rule can swallow the comma ("RULE:a/b/Lx,DEFAULT" is one bad rule)
		}
		if len(withDefault.rules) != len(m.rules)+1 {
			return // as above, when the last rule absorbed the text
		}
		if _, err := withDefault.Name(subject); errors.Is(err, ErrNoMatchingRule) {
			t.Fatalf("%q,DEFAULT on %q: %v", rules, subject, err)
		}
	})
}
