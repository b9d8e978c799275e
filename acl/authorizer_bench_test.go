package acl

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

// tenThousand is 10,000 bindings as a busy cluster has them: literal topic
// ACLs for 100 users, prefixed ones of several lengths, group ACLs, a
// wildcard deny for another host.
func tenThousand() []Binding {
	bindings := make([]Binding, 0, 10_000)
	for i := 0; i < 5000; i++ {
		bindings = append(bindings, bind(topic, fmt.Sprintf("topic-%d", i), literal, fmt.Sprintf("User:u%d", i%100), "*", write, allow))
	}
	for i := 0; i < 3999; i++ {
		bindings = append(bindings, bind(topic, fmt.Sprintf("team-%d-%s", i, "xxxxxxxxxx"[:i%10]), prefixed, fmt.Sprintf("User:u%d", i%100), "*", read, allow))
	}
	for i := 0; i < 1000; i++ {
		bindings = append(bindings, bind(group, fmt.Sprintf("group-%d", i), literal, fmt.Sprintf("User:u%d", i%100), "*", read, allow))
	}
	return append(bindings, bind(topic, "*", literal, "User:*", "10.9.9.9", write, deny))
}

func BenchmarkAuthorize10k(b *testing.B) {
	a, err := Open(&MemStore{}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Create(tenThousand()); err != nil {
		b.Fatal(err)
	}
	if a.Len() != 10_000 {
		b.Fatalf("%d bindings, want 10000", a.Len())
	}
	cases := []struct {
		name     string
		who      auth.Principal
		op       kmsg.ACLOperation
		resource string
		want     bool
	}{
		{"literal", auth.User("u42"), write, "topic-4242", true},
		{"prefixed", auth.User("u17"), read, "team-17-xxxxxxx-payments", true},
		{"denied", auth.User("u1"), write, "topic-4242", false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if a.Authorize(c.who, "127.0.0.1", c.op, topic, c.resource) != c.want {
					b.Fatal("wrong decision")
				}
			}
		})
	}
}

// TestAuthorizeAllocates pins the hot path at zero allocations.
func TestAuthorizeAllocates(t *testing.T) {
	a := openWith(t, Config{}, tenThousand()...)
	allocs := testing.AllocsPerRun(100, func() {
		if !a.Authorize(auth.User("u17"), "127.0.0.1", read, topic, "team-17-xxxxxxx-payments") {
			t.Fatal("denied")
		}
	})
	if allocs != 0 {
		t.Fatalf("Authorize allocates %v times per call, want 0", allocs)
	}
}
