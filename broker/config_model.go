package broker

// The config model: Kafka's ConfigDef for topic configs (LogConfig) and
// the broker configs the node takes, generated from the Kafka 4.4 jars
// into kafka_config_defs.go (scripts/kafkaconfigs). A value is parsed as
// Kafka's ConfigDef.parseType parses it, checked with the def's
// validator, and kept in the form Kafka writes it back
// (ConfigDef.convertToString): " 5" is 5, TRUE is true, "compact, delete"
// is compact,delete, 1 as a double is 1.0. Refusals carry Kafka's message.

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mirrord/mirrord/netio"
	"github.com/twmb/franz-go/pkg/kerr"
)

// configDef is one config of Kafka's ConfigDef.
type configDef struct {
	name string
	typ  netio.ConfigType
	// kafkaDefault is Kafka's default as Kafka writes it; nil where it
	// has none.
	kafkaDefault *string
	// validator is Kafka's validator as it prints itself ("[0,...]",
	// "[1,...,9] or -1", "[compact, delete]"); "" for none.
	validator string
	// synonyms are a topic config's broker configs, the one that wins
	// first.
	synonyms []configSynonym
	internal bool // accepted, never described (internal.segment.bytes)
	doc      *string
}

// configSynonym is a broker config that sets a topic config's default:
// its value times millisPer is the topic config's (hours and minutes to
// milliseconds; 1 otherwise).
type configSynonym struct {
	name      string
	millisPer int64
}

var (
	topicConfigDefs  = indexDefs(kafkaTopicConfigs)
	brokerConfigDefs = indexDefs(kafkaBrokerConfigs)
)

func indexDefs(defs []configDef) map[string]*configDef {
	m := make(map[string]*configDef, len(defs))
	for i := range defs {
		m[defs[i].name] = &defs[i]
	}
	return m
}

// errConfigValue is a value its ConfigDef refuses; wrapped with Kafka's
// message.
func invalidValue(name string, shown any, reason string) error {
	return netio.Errorf(kerr.InvalidConfig, "Invalid value %v for configuration %s: %s", shown, name, reason)
}

// parse returns value in the form Kafka writes it back, or Kafka's
// refusal (INVALID_CONFIG).
func (d *configDef) parse(value string) (string, error) {
	trimmed := strings.TrimSpace(value)
	var canonical string
	switch d.typ {
	case netio.ConfigTypeBoolean:
		switch strings.ToLower(trimmed) {
		case "true", "false":
			canonical = strings.ToLower(trimmed)
		default:
			return "", invalidValue(d.name, trimmed, "Expected value to be either true or false")
		}
	case netio.ConfigTypeInt, netio.ConfigTypeShort, netio.ConfigTypeLong:
		bits, typeName := map[netio.ConfigType]int{netio.ConfigTypeInt: 32, netio.ConfigTypeShort: 16, netio.ConfigTypeLong: 64}[d.typ],
			map[netio.ConfigType]string{netio.ConfigTypeInt: "INT", netio.ConfigTypeShort: "SHORT", netio.ConfigTypeLong: "LONG"}[d.typ]
		n, err := strconv.ParseInt(trimmed, 10, bits)
		if err != nil {
			return "", invalidValue(d.name, trimmed, "Not a number of type "+typeName)
		}
		canonical = strconv.FormatInt(n, 10)
	case netio.ConfigTypeDouble:
		f, err := strconv.ParseFloat(trimmed, 64)
		if err != nil {
			return "", invalidValue(d.name, trimmed, "Not a number of type DOUBLE")
		}
		canonical = javaDouble(f)
	case netio.ConfigTypeList:
		canonical = strings.Join(splitList(trimmed), ",")
	default:
		canonical = trimmed
	}
	return canonical, d.check(canonical)
}

// splitList splits a list value as Kafka does: "" is the empty list,
// elements are trimmed.
func splitList(value string) []string {
	if strings.TrimSpace(value) == "" {
		return nil
	}
	items := strings.Split(value, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// javaDouble writes f as Java's Double.toString does.
func javaDouble(f float64) string {
	abs := math.Abs(f)
	if f == 0 || abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".NI") {
			s += ".0"
		}
		return s
	}
	mantissa, exponent, _ := strings.Cut(strconv.FormatFloat(f, 'E', -1, 64), "E")
	if !strings.Contains(mantissa, ".") {
		mantissa += ".0"
	}
	e, _ := strconv.Atoi(exponent)
	return mantissa + "E" + strconv.Itoa(e)
}

var (
	rangeValidator     = regexp.MustCompile(`^\[(-?[0-9.]+),\.\.\.(?:,(-?[0-9.]+))?\]( or (-?[0-9]+))?$`)
	throttledValidator = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
	throttledReplica   = regexp.MustCompile(`^[0-9]+:[0-9]+$`)
)

// check applies the def's validator to a parsed value, with Kafka's
// messages.
func (d *configDef) check(canonical string) error {
	switch {
	case d.validator == "":
		return nil
	case d.validator == throttledValidator:
		items := splitList(canonical)
		if len(items) == 1 && items[0] == "*" {
			return nil
		}
		for _, item := range items {
			if !throttledReplica.MatchString(item) {
				return invalidValue(d.name, "["+strings.Join(items, ", ")+"]",
					d.name+" must be the literal '*' or a list of replicas in the following format: "+throttledValidator)
			}
		}
		return nil
	}
	if m := rangeValidator.FindStringSubmatch(d.validator); m != nil {
		n, _ := strconv.ParseFloat(canonical, 64)
		low, _ := strconv.ParseFloat(m[1], 64)
		if m[4] != "" { // [low,...,high] or value
			or, _ := strconv.ParseFloat(m[4], 64)
			high, _ := strconv.ParseFloat(m[2], 64)
			if n != or && (n < low || n > high) {
				return invalidValue(d.name, canonical, fmt.Sprintf("Value must be between %s and %s or equal to %s", m[1], m[2], m[4]))
			}
			return nil
		}
		if n < low {
			return invalidValue(d.name, canonical, "Value must be at least "+m[1])
		}
		if high, err := strconv.ParseFloat(m[2], 64); err == nil && n > high {
			return invalidValue(d.name, canonical, "Value must be no more than "+m[2])
		}
		return nil
	}
	allowed := strings.Split(strings.Trim(d.validator, "[]"), ", ")
	values := []string{canonical}
	if d.typ == netio.ConfigTypeList {
		values = splitList(canonical)
	}
	for _, v := range values {
		if v == "" {
			return netio.Errorf(kerr.InvalidConfig, "Configuration '%s' values must not be empty.", d.name)
		}
		if !slices.Contains(allowed, v) {
			return invalidValue(d.name, v, "String must be one of: "+strings.Join(allowed, ", "))
		}
	}
	return nil
}

// brokerDefault is the broker config name's value as a topic config's
// default: its static value if set (converted), else nothing.
func (s configSynonym) topicValue(static map[string]string) (string, bool) {
	v, ok := static[s.name]
	if !ok {
		return "", false
	}
	if s.millisPer == 1 {
		return v, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return v, true // -1 (unlimited) and the like pass as they are
	}
	return strconv.FormatInt(n*s.millisPer, 10), true
}
