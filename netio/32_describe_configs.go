package netio

// DescribeConfigs, versions 1-4 (v0 removed in Kafka 4.0, KIP-896),
// answered as a Kafka 4.4 broker answers:
// each resource (a topic, or a broker by node ID) on its own, with its
// error (UNKNOWN_TOPIC_OR_PARTITION for a topic this node lacks) or every
// config it has (ConfigNames, when not null, selects some) and an empty,
// non-null error message, as Kafka sends. Each config names its source
// and, when asked, its synonyms; v3+ its type and, when asked, its
// documentation (null where Kafka has none). Backend.Configs answers.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func serveDescribeConfigs(_ context.Context, c *conn, _ RequestHeader, kreq kmsg.Request) (any, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		resource := ConfigResource{Type: ConfigResourceType(rr.ResourceType), Name: rr.ResourceName}
		entries, err := unlessDenied(c.configsDenied(opDescribeConfigs, resource) == nil, configsDenial(resource), func() ([]ConfigEntry, error) {
			return c.server.backend.Configs().DescribeConfigs(resource, rr.ConfigNames)
		})
		if err != nil {
			sr.ErrorCode = errorCode(c.server.log, err, kerr.UnknownServerError)
			message := err.Error()
			sr.ErrorMessage = &message
			sr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		sr.ErrorMessage = new("")
		sr.Configs = make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(entries))
		for _, e := range entries {
			sr.Configs = append(sr.Configs, describedConfig(e, req))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// describedConfig is one entry at the request's version.
func describedConfig(e ConfigEntry, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	rc := kmsg.NewDescribeConfigsResponseResourceConfig()
	rc.Name, rc.Value, rc.ReadOnly, rc.IsSensitive = e.Name, e.Value, e.ReadOnly, e.Sensitive
	rc.Source = kmsg.ConfigSource(e.Source)
	rc.ConfigType = kmsg.ConfigType(e.Type)
	if req.IncludeDocumentation {
		rc.Documentation = e.Documentation
	}
	rc.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
	if req.IncludeSynonyms {
		for _, s := range e.Synonyms {
			sc := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sc.Name, sc.Value, sc.Source = s.Name, s.Value, kmsg.ConfigSource(s.Source)
			rc.ConfigSynonyms = append(rc.ConfigSynonyms, sc)
		}
	}
	return rc
}
