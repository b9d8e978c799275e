package netio

import "context"

// Configs is the node's configs as DescribeConfigs, AlterConfigs and
// IncrementalAlterConfigs see them: each topic's, and the node's own (the
// broker resource). The handlers check versions and shapes and answer
// each resource with what these return.
type Configs interface {
	// DescribeConfigs returns a resource's configs, sorted by name; names,
	// when not nil, selects some (a name the resource does not have is
	// left out, as Kafka leaves it out). An unknown topic is
	// kerr.UnknownTopicOrPartition.
	DescribeConfigs(resource ConfigResource, names []string) ([]ConfigEntry, error)
	// AlterConfigs changes a resource's configs. Not incremental
	// (AlterConfigs), changes are every override the resource keeps, each
	// a ConfigSet: the ones not named go back to their defaults.
	// Incremental (IncrementalAlterConfigs), each change applies its op to
	// the current overrides. validateOnly checks without applying. A bad
	// value is kerr.InvalidConfig naming the key.
	AlterConfigs(ctx context.Context, resource ConfigResource, changes []ConfigChange, incremental, validateOnly bool) error
}

// ConfigResourceType is a config resource's type, as Kafka numbers them.
type ConfigResourceType int8

const (
	ConfigResourceTopic        ConfigResourceType = 2
	ConfigResourceBroker       ConfigResourceType = 4
	ConfigResourceBrokerLogger ConfigResourceType = 8
)

// ConfigResource names a resource: a topic by name, a broker by its node
// ID in decimal ("" for the cluster-wide broker default).
type ConfigResource struct {
	Type ConfigResourceType
	Name string
}

// ConfigType is a config's type, as DescribeConfigs v3+ numbers Kafka's
// ConfigDef types.
type ConfigType int8

const (
	ConfigTypeBoolean  ConfigType = 1
	ConfigTypeString   ConfigType = 2
	ConfigTypeInt      ConfigType = 3
	ConfigTypeShort    ConfigType = 4
	ConfigTypeLong     ConfigType = 5
	ConfigTypeDouble   ConfigType = 6
	ConfigTypeList     ConfigType = 7
	ConfigTypeClass    ConfigType = 8
	ConfigTypePassword ConfigType = 9
)

// ConfigEntry is one config of a resource as DescribeConfigs answers it.
type ConfigEntry struct {
	Name string
	// Value is nil for a sensitive config, or one without a value.
	Value     *string
	Source    ConfigSource
	ReadOnly  bool
	Sensitive bool
	Type      ConfigType
	// Documentation is nil where Kafka has none.
	Documentation *string
	// Synonyms are where the value could come from, the one in effect
	// first (v1+, when asked for).
	Synonyms []ConfigSynonym
}

// ConfigSynonym is one source of a config's value.
type ConfigSynonym struct {
	Name   string
	Value  *string
	Source ConfigSource
}

// ConfigOp is an IncrementalAlterConfigs operation, as Kafka numbers them.
type ConfigOp int8

const (
	ConfigSet      ConfigOp = 0
	ConfigDelete   ConfigOp = 1
	ConfigAppend   ConfigOp = 2 // list-typed configs only
	ConfigSubtract ConfigOp = 3 // list-typed configs only
)

// ConfigChange is one change of an alter request.
type ConfigChange struct {
	Name  string
	Op    ConfigOp
	Value *string
}
