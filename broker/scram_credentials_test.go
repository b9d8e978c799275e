package broker

import (
	"path"
	"testing"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

// Credentials a node stored survive its restart, and only synced bytes
// count (vfs.Mem.Durable).
func TestScramCredentialsDurable(t *testing.T) {
	fs := vfs.NewMem()
	n := openTestNodeAt(t, fs, "/data")
	salted := make([]byte, 64)
	if errs := n.ScramCredentials().Alter([]auth.ScramAlteration{
		{User: "alice", Mechanism: auth.MechanismScramSHA512, Iterations: 8192, Salt: []byte("salt"), SaltedPassword: salted},
	}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, ok := fs.Durable(path.Join("/data", scramCredentialsName)); !ok {
		t.Fatal("the credentials file is not durable after Alter returned")
	}
	want, _ := n.ScramCredentials().Lookup(auth.MechanismScramSHA512, "alice")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := openTestNodeAt(t, fs, "/data")
	defer reopened.Close()
	got, ok := reopened.ScramCredentials().Lookup(auth.MechanismScramSHA512, "alice")
	if !ok || got.Iterations != 8192 || string(got.StoredKey) != string(want.StoredKey) || string(got.ServerKey) != string(want.ServerKey) {
		t.Fatalf("after reopen: %+v, %v", got, ok)
	}
	if _, ok, _ := logstore.ReadFile(fs, path.Join("/data", scramCredentialsName+".tmp")); ok {
		t.Fatal("a temporary file is left")
	}
}
