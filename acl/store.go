package acl

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/auth"
)

const fileVersion = "1"

// Store keeps the encoded ACLs durably; the node's is the file
// <data dir>/acls (broker). Package acl does no I/O of its own.
type Store interface {
	// Load returns the stored bytes; ok is false when nothing was ever
	// saved.
	Load() (data []byte, ok bool, err error)
	// Save replaces the stored bytes, durably and atomically, before it
	// returns.
	Save(data []byte) error
}

// MemStore is a Store in memory: for tests, and for an embedder that
// keeps no ACLs across restarts. Fail, when set, fails every Save.
type MemStore struct {
	mu   sync.Mutex
	data []byte
	Fail error
}

func (m *MemStore) Load() ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.data), m.data != nil, nil
}

func (m *MemStore) Save(data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	m.data = bytes.Clone(data)
	return nil
}

// ErrCorrupt marks an acls file that does not parse.
var ErrCorrupt = errors.New("acl: corrupt acls file")

// Open loads the ACLs in store (none if it holds nothing yet) and returns
// the authorizer deciding by them and cfg.
func Open(store Store, cfg Config) (*Authorizer, error) {
	a := &Authorizer{superUsers: map[auth.Principal]bool{}, allowEmpty: cfg.AllowEveryoneIfNoACLFound, store: store}
	for _, p := range cfg.SuperUsers {
		a.superUsers[p] = true
	}
	data, ok, err := store.Load()
	if err != nil {
		return nil, fmt.Errorf("acl: open: %w", err)
	}
	var bindings []Binding
	if ok {
		if bindings, err = decode(data); err != nil {
			return nil, err
		}
	}
	a.index.Store(newIndex(bindings))
	return a, nil
}

// Create adds the bindings (an existing one stays, once). errs[i] is
// bindings[i]'s validation error (ErrInvalid), if any; the valid ones are
// durable when err is nil, and none is added when err is not.
func (a *Authorizer) Create(bindings []Binding) (errs []error, err error) {
	errs = make([]error, len(bindings))
	var valid []Binding
	for i, b := range bindings {
		if errs[i] = b.Validate(); errs[i] == nil {
			valid = append(valid, b)
		}
	}
	if len(valid) == 0 {
		return errs, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	current := a.index.Load().bindings
	next := make([]Binding, 0, len(current)+len(valid))
	next = append(append(next, current...), valid...)
	return errs, a.publish(next)
}

// Delete removes every binding a filter matches and returns, per filter,
// the bindings it removed (a binding matched by several filters is
// reported under the first). errs[i] is filters[i]'s validation error.
// Nothing is removed when err is not nil.
func (a *Authorizer) Delete(filters []Filter) (deleted [][]Binding, errs []error, err error) {
	deleted = make([][]Binding, len(filters))
	errs = make([]error, len(filters))
	for i, f := range filters {
		errs[i] = f.Validate()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	current := a.index.Load().bindings
	next := make([]Binding, 0, len(current))
	removed := false
	for _, b := range current {
		matched := false
		for i, f := range filters {
			if errs[i] == nil && f.Matches(b) {
				deleted[i] = append(deleted[i], b)
				matched = true
				break
			}
		}
		if matched {
			removed = true
			continue
		}
		next = append(next, b)
	}
	if !removed {
		return deleted, errs, nil
	}
	if err := a.publish(next); err != nil {
		return make([][]Binding, len(filters)), errs, err
	}
	return deleted, errs, nil
}

// publish sorts and deduplicates bindings, writes them durably, then makes
// them the ones Authorize decides by. Called with mu held.
func (a *Authorizer) publish(bindings []Binding) error {
	sort.Slice(bindings, func(i, j int) bool { return bindingLess(bindings[i], bindings[j]) })
	unique := bindings[:0]
	for i, b := range bindings {
		if i > 0 && b == bindings[i-1] {
			continue
		}
		unique = append(unique, b)
	}
	if err := a.store.Save(encode(unique)); err != nil {
		return fmt.Errorf("acl: save: %w", err)
	}
	a.index.Store(newIndex(unique))
	return nil
}

func bindingLess(x, y Binding) bool {
	switch {
	case x.ResourceType != y.ResourceType:
		return x.ResourceType < y.ResourceType
	case x.ResourceName != y.ResourceName:
		return x.ResourceName < y.ResourceName
	case x.PatternType != y.PatternType:
		return x.PatternType < y.PatternType
	case x.Principal != y.Principal:
		return x.Principal < y.Principal
	case x.Host != y.Host:
		return x.Host < y.Host
	case x.Operation != y.Operation:
		return x.Operation < y.Operation
	}
	return x.Permission < y.Permission
}

func encode(bindings []Binding) []byte {
	var b bytes.Buffer
	b.WriteString(fileVersion + "\n")
	for _, x := range bindings {
		fmt.Fprintf(&b, "acl %s %s %s %s %s %s %s\n", ResourceTypeName(x.ResourceType), x.PatternType,
			strconv.Quote(x.ResourceName), strconv.Quote(x.Principal), strconv.Quote(x.Host), x.Operation, x.Permission)
	}
	return b.Bytes()
}

func decode(data []byte) ([]Binding, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != fileVersion {
		return nil, fmt.Errorf("%w: version %q", ErrCorrupt, lines[0])
	}
	bindings := make([]Binding, 0, len(lines)-1)
	for i, line := range lines[1:] {
		b, err := decodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %q: %w", ErrCorrupt, i+2, line, err)
		}
		bindings = append(bindings, b)
	}
	return bindings, nil
}

func decodeLine(line string) (Binding, error) {
	var b Binding
	rest, ok := strings.CutPrefix(line, "acl ")
	if !ok {
		return b, errors.New("not an acl line")
	}
	fields := strings.SplitN(rest, " ", 2)
	if len(fields) != 2 {
		return b, errors.New("short line")
	}
	var err error
	if b.ResourceType, err = ParseResourceType(fields[0]); err != nil {
		return b, err
	}
	patternType, rest, _ := strings.Cut(fields[1], " ")
	if b.PatternType, err = kmsg.ParseACLResourcePatternType(patternType); err != nil {
		return b, err
	}
	for _, s := range []*string{&b.ResourceName, &b.Principal, &b.Host} {
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return b, err
		}
		*s, _ = strconv.Unquote(quoted)
		rest = strings.TrimPrefix(rest[len(quoted):], " ")
	}
	operation, permission, _ := strings.Cut(rest, " ")
	if b.Operation, err = kmsg.ParseACLOperation(operation); err != nil {
		return b, err
	}
	if b.Permission, err = kmsg.ParseACLPermissionType(permission); err != nil {
		return b, err
	}
	return b, b.Validate()
}
