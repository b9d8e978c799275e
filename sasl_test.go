package mirrord

import (
	"context"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/auth"
)

func TestListenerSASLProperties(t *testing.T) {
	store, _ := auth.OpenScramCredentials(nil, func([]byte) error { return nil })
	props := map[string]string{
		"sasl.enabled.mechanisms":                      "SCRAM-SHA-512",
		"listener.name.client.sasl.enabled.mechanisms": "PLAIN, SCRAM-SHA-512",
		"listener.name.client.plain.sasl.jaas.config":  `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";`,
		"num.partitions":                               "3",
	}
	sasl, err := takeSASLProperties(props)
	if err != nil || len(props) != 1 || props["num.partitions"] != "3" {
		t.Fatalf("took %v, left %v, %v", sasl, props, err)
	}
	for _, tc := range []struct{ listener, names string }{{"CLIENT", "PLAIN,SCRAM-SHA-512"}, {"OTHER", "SCRAM-SHA-512"}} {
		config, err := sasl.listenerSASL(context.Background(), tc.listener, store)
		if err != nil || strings.Join(config.Names(), ",") != tc.names {
			t.Fatalf("%s: %v, %v", tc.listener, config, err)
		}
	}
	if _, _, err := (func() (any, any, error) {
		c, _ := sasl.listenerSASL(context.Background(), "CLIENT", store)
		m, _ := c.Mechanism("PLAIN")
		return m.NewExchange().Step([]byte("\x00admin\x00admin-secret"))
	})(); err != nil {
		t.Fatalf("admin from the JAAS config: %v", err)
	}
	if _, err := takeSASLProperties(map[string]string{"sasl.jaas.config": "x"}); err == nil {
		t.Fatal("unprefixed sasl.jaas.config accepted")
	}
	for _, bad := range []map[string]string{
		{"sasl.enabled.mechanisms": "GSSAPI"},
		{"sasl.enabled.mechanisms": "PLAIN"}, // no users
		{"sasl.enabled.mechanisms": ""},
	} {
		taken, _ := takeSASLProperties(bad)
		if _, err := taken.listenerSASL(context.Background(), "CLIENT", store); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}
