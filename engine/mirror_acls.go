package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/acl"
	"github.com/mirrord/mirrord/logstore"
)

// ACL sync (KIP-1279): every mirror.acls.sync.interval.ms a mirror reads
// its source's ACLs (one DescribeAcls matching every binding; the
// mirror's source principal needs DESCRIBE on the source's CLUSTER),
// keeps those whose resource name matches acls.include, and makes this
// node's ACLs (broker.Node.Authorizer, durable in <data dir>/acls) agree:
//
//   - a source ACL missing here is created, and the mirror owns it;
//   - an ACL the mirror owns that the source no longer has (or that
//     acls.include no longer selects) is deleted, unless another mirror
//     of this node owns it too;
//   - ACLs on the ClusterMirror resource type are never copied nor
//     deleted: they say who administers this node's mirrors;
//   - every other ACL of this node is left alone: those an operator made
//     (kafka-acls.sh against this node) and those other mirrors own. An
//     ACL already here when the source first shows it stays the
//     operator's, unless a mirror owns it; then this mirror owns it too.
//
// Ownership is what keeps two mirrors (or a mirror and an operator) from
// deleting each other's ACLs: each mirror's owned set is durable in
// <data dir>/acls-mirror-<name>.json, written before the ACLs it names
// are created and after those it dropped are deleted, so a crash between
// the two leaves an owned ACL missing (created again next round) or an
// owned ACL already deleted (dropped next round), never an ACL nobody
// owns that a mirror made. Deleting a mirror drops its owned set and
// keeps its ACLs: after a failover the clients need them. A round that
// cannot read the source's ACLs changes nothing.
//
// A node without an authorizer (authorizer.class.name unset) has no ACLs
// to write: the sync reports that once (Kafka's SECURITY_DISABLED) and
// never asks the source.

const aclOwnersPrefix, aclOwnersSuffix = "acls-mirror-", ".json"

// errNoAuthorizer is the ACL sync on a node without an authorizer.
var errNoAuthorizer = fmt.Errorf("%w: this node has no authorizer (authorizer.class.name unset): ACL sync is off", kerr.SecurityDisabled)

// aclOwnership is which ACLs of this node each mirror owns, for every
// mirror of the node; mu serializes the mirrors' ACL sync rounds.
type aclOwnership struct {
	mu     sync.Mutex
	owners map[string]map[acl.Binding]bool // by mirror name; bounded by the mirrors and their sources' ACLs
}

// aclOwnersFile is the JSON of a mirror's owned set.
type aclOwnersFile struct {
	Version int           `json:"version"` // 1
	ACLs    []acl.Binding `json:"acls"`    // sorted by String
}

// loadACLOwnership reads the owned sets of the mirrors persisted in the
// data directory (before any mirror runs); the set of a mirror without a
// record (a crash while it was deleted) is removed.
func (n *Node) loadACLOwnership(records []mirrorRecord) error {
	n.acls.owners = map[string]map[acl.Binding]bool{}
	exists := map[string]bool{}
	for _, r := range records {
		exists[r.Name] = true
	}
	files, err := n.cfg.FS.List(n.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("engine: ACL ownership: %w", err)
	}
	for _, file := range files {
		if !strings.HasPrefix(file, aclOwnersPrefix) || !strings.HasSuffix(file, aclOwnersSuffix) {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(file, aclOwnersPrefix), aclOwnersSuffix)
		if !exists[name] {
			if err := n.cfg.FS.Remove(path.Join(n.cfg.DataDir, file)); err != nil {
				return fmt.Errorf("engine: ACL ownership: %w", err)
			}
			continue
		}
		data, _, err := logstore.ReadFile(n.cfg.FS, path.Join(n.cfg.DataDir, file))
		if err != nil {
			return fmt.Errorf("engine: ACL ownership: %w", err)
		}
		var owned aclOwnersFile
		if err := json.Unmarshal(data, &owned); err != nil || owned.Version != 1 {
			return fmt.Errorf("engine: ACL ownership: %s: not a version 1 owned set (%v)", file, err)
		}
		set := map[acl.Binding]bool{}
		for _, b := range owned.ACLs {
			set[b] = true
		}
		n.acls.owners[name] = set
	}
	return nil
}

// saveACLOwners makes a mirror's owned set durable (n.acls.mu held).
func (n *Node) saveACLOwners(mirror string, owned map[acl.Binding]bool) error {
	file := aclOwnersFile{Version: 1, ACLs: make([]acl.Binding, 0, len(owned))}
	for b := range owned {
		file.ACLs = append(file.ACLs, b)
	}
	sort.Slice(file.ACLs, func(i, j int) bool { return file.ACLs[i].String() < file.ACLs[j].String() })
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := logstore.WriteFileAtomic(n.cfg.FS, n.cfg.DataDir, aclOwnersPrefix+mirror+aclOwnersSuffix, data); err != nil {
		return fmt.Errorf("engine: save the ACLs mirror %s owns: %w", mirror, err)
	}
	return nil
}

// dropACLOwners forgets a deleted mirror's owned set; its ACLs stay.
func (n *Node) dropACLOwners(mirror string) error {
	n.acls.mu.Lock()
	defer n.acls.mu.Unlock()
	delete(n.acls.owners, mirror)
	err := n.cfg.FS.Remove(path.Join(n.cfg.DataDir, aclOwnersPrefix+mirror+aclOwnersSuffix))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("engine: drop the ACLs mirror %s owns: %w", mirror, err)
	}
	return nil
}

// ACLsOwned are the ACLs of this node a mirror owns, sorted.
func (n *Node) ACLsOwned(mirror string) []acl.Binding {
	n.acls.mu.Lock()
	defer n.acls.mu.Unlock()
	out := make([]acl.Binding, 0, len(n.acls.owners[mirror]))
	for b := range n.acls.owners[mirror] {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// syncACLsLoop runs an ACL sync round every mirror.acls.sync.interval.ms
// until ctx is done.
func (m *mirror) syncACLsLoop(ctx context.Context) {
	runEvery(ctx, m.config.ACLsSyncInterval, m.syncACLs)
}

// syncACLs runs one ACL sync round; on a node without an authorizer it
// records errNoAuthorizer and logs it, once.
func (m *mirror) syncACLs(ctx context.Context) {
	if m.node.Authorizer() == nil {
		if m.aclSync.setOnce(errNoAuthorizer) {
			m.log.Warn("ACL sync off", "error", errNoAuthorizer)
		}
		return
	}
	m.aclSync.runRound(ctx, m, "ACL sync", m.syncACLsRound)
}

// setOnce records err as the sync's state without counting a failed
// round; it says whether err is new.
func (s *syncStatus) setOnce(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Err == err.Error() {
		return false
	}
	s.status = SyncStatus{Err: err.Error(), Errors: s.status.Errors}
	return true
}

// syncACLsRound reads the source's ACLs and makes this node's agree; it
// returns the source ACLs selected that this node holds after the round.
func (m *mirror) syncACLsRound(ctx context.Context) (int, error) {
	source, errs := m.describeSourceACLs(ctx)
	if source == nil {
		return 0, errors.Join(errs...)
	}
	authorizer := m.node.Authorizer()
	ownership := &m.node.acls
	ownership.mu.Lock()
	defer ownership.mu.Unlock()
	owned := ownership.owners[m.name]
	others := map[acl.Binding]bool{}
	for name, set := range ownership.owners {
		if name != m.name {
			for b := range set {
				others[b] = true
			}
		}
	}
	local := map[acl.Binding]bool{}
	for _, b := range authorizer.Describe(acl.FilterAll) {
		local[b] = true
	}
	next := map[acl.Binding]bool{}
	var create, remove []acl.Binding
	for b := range source {
		switch {
		case !local[b]:
			create = append(create, b)
			next[b] = true
		case owned[b] || others[b]:
			next[b] = true
		}
	}
	for b := range owned {
		if !source[b] && !others[b] && local[b] {
			remove = append(remove, b)
		}
	}
	// Own what is about to be created before it exists.
	if len(create) > 0 {
		pending := union(owned, next)
		if err := m.node.saveACLOwners(m.name, pending); err != nil {
			return len(source) - len(create), errors.Join(append(errs, err)...)
		}
		ownership.owners[m.name] = pending
		createErrs, err := authorizer.Create(create)
		if err != nil {
			return len(source) - len(create), errors.Join(append(errs, fmt.Errorf("create %d ACLs: %w", len(create), err))...)
		}
		for i, err := range createErrs {
			if err != nil {
				errs = append(errs, fmt.Errorf("create ACL %v: %w", create[i], err))
				delete(next, create[i])
			}
		}
	}
	if len(remove) > 0 {
		filters := make([]acl.Filter, len(remove))
		for i, b := range remove {
			filters[i] = b.Exact()
		}
		if _, _, err := authorizer.Delete(filters); err != nil {
			errs = append(errs, fmt.Errorf("delete %d ACLs the source no longer has: %w", len(remove), err))
			for _, b := range remove { // still here: still owned
				next[b] = true
			}
		}
	}
	if err := m.node.saveACLOwners(m.name, next); err != nil {
		return len(next), errors.Join(append(errs, err)...)
	}
	ownership.owners[m.name] = next
	synced := 0
	for b := range source {
		if local[b] || next[b] {
			synced++
		}
	}
	return synced, errors.Join(errs...)
}

// union is the union of two sets.
func union(a, b map[acl.Binding]bool) map[acl.Binding]bool {
	out := make(map[acl.Binding]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// describeSourceACLs asks the source for all its ACLs and returns those
// the sync copies: acls.include selects the resource name, the
// ClusterMirror ones are left out, and one this node would refuse is an
// error of the round. A nil set: the source's ACLs are unknown.
func (m *mirror) describeSourceACLs(ctx context.Context) (map[acl.Binding]bool, []error) {
	ctx, cancel := context.WithTimeout(ctx, m.config.RequestTimeout)
	defer cancel()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, m.client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
		if err != nil && resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	if err != nil {
		return nil, []error{fmt.Errorf("describe the source's ACLs: %w", err)}
	}
	var errs []error
	source := map[acl.Binding]bool{} // bounded by the source's ACLs
	for _, r := range resp.Resources {
		if r.ResourceType == acl.ResourceClusterMirror || !m.config.ACLsInclude.Matches(r.ResourceName) {
			continue
		}
		for _, entry := range r.ACLs {
			b := acl.Binding{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
				Principal: entry.Principal, Host: entry.Host, Operation: entry.Operation, Permission: entry.PermissionType}
			if resp.Version == 0 { // v0 has no pattern type: every ACL is literal
				b.PatternType = kmsg.ACLResourcePatternTypeLiteral
			}
			if err := b.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("source ACL %v: %w", b, err))
				continue
			}
			source[b] = true
		}
	}
	return source, errs
}
