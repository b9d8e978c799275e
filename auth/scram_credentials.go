package auth

// The node's SCRAM credentials, as Kafka's controller keeps them
// (ScramControlManager): per user and mechanism the salt, the stored key,
// the server key and the iteration count (RFC 5802), never the password.
// AlterUserScramCredentials sends the salted password (the client salts
// and hashes); the store keeps the two keys derived from it.
//
// On disk (the owner persists the bytes atomically; see broker):
//
//	1                                                   format version
//	<Go-quoted user> <mechanism> <iterations> <salt> <stored key> <server key>
//	...                                                 base64 (std), sorted by user, mechanism

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Kafka's ScramMechanism bounds on iterations.
const (
	ScramIterationsMin = 4096
	ScramIterationsMax = 16384
)

const scramCredentialsVersion = "1"

// Errors of AlterUserScramCredentials, one per alteration (netio answers
// Kafka's codes and messages).
var (
	ErrScramDuplicateUser     = errors.New("auth: a user credential cannot be altered twice in the same request")
	ErrScramEmptyUser         = errors.New("auth: username must not be empty")
	ErrScramUnknownMechanism  = errors.New("auth: unknown SCRAM mechanism")
	ErrScramTooFewIterations  = errors.New("auth: too few iterations")
	ErrScramTooManyIterations = errors.New("auth: too many iterations")
	ErrScramNotFound          = errors.New("auth: the user credential does not exist")
	errScramCredentialsFile   = errors.New("auth: corrupt SCRAM credentials file")
)

// ScramCredential is one user's credential for one mechanism.
type ScramCredential struct {
	Iterations                 int32
	Salt, StoredKey, ServerKey []byte
}

// ScramAlteration is one entry of AlterUserScramCredentials: a deletion,
// or an upsertion with the client's salt and salted password.
type ScramAlteration struct {
	User, Mechanism string
	Delete          bool
	Iterations      int32
	Salt            []byte
	SaltedPassword  []byte
}

// ScramUserInfo is what DescribeUserScramCredentials answers for a user:
// the mechanisms it has and their iterations.
type ScramUserInfo struct {
	User       string
	Mechanisms []string // sorted
	Iterations []int32  // by Mechanisms
}

// ScramCredentials is the node's SCRAM credential store. Safe for
// concurrent use; a change is persisted before it is visible.
type ScramCredentials struct {
	persist func([]byte) error

	mu    sync.RWMutex
	users map[string]map[string]ScramCredential // user -> mechanism -> credential
}

// scramHash is the hash of a SCRAM mechanism, or nil.
func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case MechanismScramSHA256:
		return sha256.New
	case MechanismScramSHA512:
		return sha512.New
	}
	return nil
}

// OpenScramCredentials reads a store from its file's contents (nil: an
// empty store); persist writes the whole new contents durably.
func OpenScramCredentials(data []byte, persist func([]byte) error) (*ScramCredentials, error) {
	s := &ScramCredentials{persist: persist, users: map[string]map[string]ScramCredential{}}
	if data == nil {
		return s, nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != scramCredentialsVersion {
		return nil, fmt.Errorf("%w: version %q", errScramCredentialsFile, lines[0])
	}
	for i, line := range lines[1:] {
		user, c, mechanism, err := decodeScramLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", errScramCredentialsFile, i+2, err)
		}
		if s.users[user] == nil {
			s.users[user] = map[string]ScramCredential{}
		}
		s.users[user][mechanism] = c
	}
	return s, nil
}

func decodeScramLine(line string) (string, ScramCredential, string, error) {
	var c ScramCredential
	quoted, err := strconv.QuotedPrefix(line)
	if err != nil {
		return "", c, "", err
	}
	user, _ := strconv.Unquote(quoted)
	fields := strings.Fields(line[len(quoted):])
	if len(fields) != 5 || scramHash(fields[0]) == nil {
		return "", c, "", fmt.Errorf("want <user> <mechanism> <iterations> <salt> <stored key> <server key>")
	}
	iterations, err := strconv.ParseInt(fields[1], 10, 32)
	if err != nil {
		return "", c, "", err
	}
	c.Iterations = int32(iterations)
	for i, into := range []*[]byte{&c.Salt, &c.StoredKey, &c.ServerKey} {
		if *into, err = base64.StdEncoding.DecodeString(fields[2+i]); err != nil {
			return "", c, "", err
		}
	}
	return user, c, fields[0], nil
}

func encodeScramCredentials(users map[string]map[string]ScramCredential) []byte {
	var b bytes.Buffer
	b.WriteString(scramCredentialsVersion + "\n")
	for _, user := range sortedKeys(users) {
		for _, mechanism := range sortedKeys(users[user]) {
			c := users[user][mechanism]
			fmt.Fprintf(&b, "%s %s %d %s %s %s\n", strconv.Quote(user), mechanism, c.Iterations,
				base64.StdEncoding.EncodeToString(c.Salt), base64.StdEncoding.EncodeToString(c.StoredKey),
				base64.StdEncoding.EncodeToString(c.ServerKey))
		}
	}
	return b.Bytes()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Lookup returns user's credential for mechanism.
func (s *ScramCredentials) Lookup(mechanism, user string) (ScramCredential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.users[user][mechanism]
	return c, ok
}

// Describe returns the users that have credentials, sorted; users not
// nil selects some (a missing one is left out).
func (s *ScramCredentials) Describe(users []string) []ScramUserInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var infos []ScramUserInfo
	for _, user := range sortedKeys(s.users) {
		if users != nil && !slices.Contains(users, user) {
			continue
		}
		info := ScramUserInfo{User: user}
		for _, mechanism := range sortedKeys(s.users[user]) {
			info.Mechanisms = append(info.Mechanisms, mechanism)
			info.Iterations = append(info.Iterations, s.users[user][mechanism].Iterations)
		}
		infos = append(infos, info)
	}
	return infos
}

// Alter applies alterations as Kafka's ScramControlManager does: a user
// named by more than one alteration is ErrScramDuplicateUser for all of
// them; each other is checked and applied alone. It returns one error (or
// nil) per alteration; a persist failure fails every applied one and
// changes nothing.
func (s *ScramCredentials) Alter(alterations []ScramAlteration) []error {
	results := make([]error, len(alterations))
	count := map[string]int{}
	for _, a := range alterations {
		count[a.User]++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]map[string]ScramCredential, len(s.users))
	for user, mechanisms := range s.users {
		next[user] = maps(mechanisms)
	}
	applied := 0
	for i, a := range alterations {
		if count[a.User] > 1 {
			results[i] = ErrScramDuplicateUser
			continue
		}
		if results[i] = applyScramAlteration(next, a); results[i] == nil {
			applied++
		}
	}
	if applied == 0 {
		return results
	}
	if err := s.persist(encodeScramCredentials(next)); err != nil {
		for i := range results {
			if results[i] == nil {
				results[i] = fmt.Errorf("auth: persisting SCRAM credentials: %w", err)
			}
		}
		return results
	}
	s.users = next
	return results
}

func maps(m map[string]ScramCredential) map[string]ScramCredential {
	out := make(map[string]ScramCredential, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func applyScramAlteration(users map[string]map[string]ScramCredential, a ScramAlteration) error {
	h := scramHash(a.Mechanism)
	switch {
	case a.User == "":
		return ErrScramEmptyUser
	case h == nil:
		return ErrScramUnknownMechanism
	case a.Delete:
		if _, ok := users[a.User][a.Mechanism]; !ok {
			return ErrScramNotFound
		}
		delete(users[a.User], a.Mechanism)
		if len(users[a.User]) == 0 {
			delete(users, a.User)
		}
		return nil
	case a.Iterations < ScramIterationsMin:
		return ErrScramTooFewIterations
	case a.Iterations > ScramIterationsMax:
		return ErrScramTooManyIterations
	}
	// RFC 5802: ClientKey = HMAC(SaltedPassword, "Client Key"),
	// StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key").
	storedKey := h()
	storedKey.Write(hmacOf(h, a.SaltedPassword, "Client Key"))
	if users[a.User] == nil {
		users[a.User] = map[string]ScramCredential{}
	}
	users[a.User][a.Mechanism] = ScramCredential{
		Iterations: a.Iterations,
		Salt:       slices.Clone(a.Salt),
		StoredKey:  storedKey.Sum(nil),
		ServerKey:  hmacOf(h, a.SaltedPassword, "Server Key"),
	}
	return nil
}

func hmacOf(h func() hash.Hash, key []byte, text string) []byte {
	mac := hmac.New(h, key)
	mac.Write([]byte(text))
	return mac.Sum(nil)
}
