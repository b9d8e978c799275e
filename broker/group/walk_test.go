package group

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// walkClient is one client of the random walk, as a consumer sees itself.
type walkClient struct {
	name       string
	memberID   string
	generation int32
	join       <-chan *kmsg.JoinGroupResponse
	sync       <-chan *kmsg.SyncGroupResponse
}

// TestRandomWalk runs seeded random sequences of joins, syncs, heartbeats,
// leaves, commits, clock moves and restarts by four clients of one group.
// The group's invariants are checked after every change (a broken one
// panics); the walk checks that every answered commit is what OffsetFetch
// returns, also after restarts, and that generations never go back.
func TestRandomWalk(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run("", func(t *testing.T) {
			t.Logf("seed %d", seed)
			walk(t, rand.New(rand.NewPCG(seed, seed)))
		})
	}
}

func walk(t *testing.T, rng *rand.Rand) {
	h := newHarness(t, nil)
	clients := make([]*walkClient, 4)
	for i := range clients {
		clients[i] = &walkClient{name: string(rune('a' + i))}
	}
	committed := map[int32]int64{} // the model: last answered commit of partition 0
	next := int64(0)
	for step := 0; step < 300; step++ {
		c := clients[rng.IntN(len(clients))]
		h.collect(clients)
		switch op := rng.IntN(10); {
		case op < 2 && c.join == nil:
			if c.memberID == "" {
				c.memberID = h.memberID(c.name, joinRequest("g", ""))
			}
			c.join = h.joinAsync(c.name, joinRequest("g", c.memberID))
		case op < 3 && c.memberID != "" && c.sync == nil && c.join == nil:
			c.sync = h.syncAsync(syncRequest("g", c.memberID, c.generation, nil))
		case op < 5 && c.memberID != "":
			h.heartbeat("g", c.memberID, c.generation)
		case op < 6 && c.memberID != "" && rng.IntN(4) == 0:
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version, leave.Group = 5, "g"
			leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: c.memberID}}
			if _, err := h.c.LeaveGroup(h.ctx(), leave); err != nil {
				t.Fatal(err)
			}
			h.collect(clients)
			c.memberID, c.generation, c.join, c.sync = "", 0, nil, nil
		case op < 8:
			next++
			member, generation := c.memberID, c.generation
			if member == "" {
				generation = -1
			}
			if codes := h.commit(commitRequest(9, "g", member, generation, map[int32]int64{0: next})); codes[0] == 0 {
				committed[0] = next
			}
		case op < 9:
			h.advance(time.Duration(rng.IntN(12000)) * time.Millisecond)
		default:
			if rng.IntN(5) == 0 {
				h.restart()
				for _, c := range clients {
					c.join, c.sync = nil, nil // their connections died with the node
				}
			}
		}
		for p, want := range committed {
			if got, _, _ := h.fetch("g", p); got != want {
				t.Fatalf("step %d: partition %d fetched %d, last answered commit %d", step, p, got, want)
			}
		}
		lastGeneration := int32(0)
		for _, r := range h.store.Records() {
			if d, err := decodeRecord(r); err == nil && d.groupValue != nil {
				if d.groupValue.Generation < lastGeneration && d.groupValue.Generation != 0 {
					t.Fatalf("step %d: generation written went back from %d to %d", step, lastGeneration, d.groupValue.Generation)
				}
				lastGeneration = max(lastGeneration, d.groupValue.Generation)
			}
		}
	}
}

// collect reads the answers that arrived and acts on them as a client
// would: a leader syncs with an assignment, an error forgets the
// generation (and the member ID, for UNKNOWN_MEMBER_ID).
func (h *harness) collect(clients []*walkClient) {
	h.t.Helper()
	h.barrier()
	for _, c := range clients {
		select {
		case r := <-c.join:
			c.join = nil
			switch {
			case r.ErrorCode == 0:
				c.generation = r.Generation
				a := map[string]string(nil)
				if r.LeaderID == c.memberID {
					a = map[string]string{}
					for _, m := range r.Members {
						a[m.MemberID] = m.MemberID[:1]
					}
				}
				c.sync = h.syncAsync(syncRequest("g", c.memberID, c.generation, a))
			case r.MemberID == "":
				c.memberID, c.generation = "", 0
			}
		default:
		}
		select {
		case r := <-c.sync:
			c.sync = nil
			if r.ErrorCode != 0 {
				c.generation = 0
			}
		default:
		}
	}
}
