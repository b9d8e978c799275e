package broker

// The node's SCRAM credentials (auth.ScramCredentials) live in one file,
// <data dir>/scram-credentials, in auth's format, replaced whole with
// logstore.WriteFileAtomic at every AlterUserScramCredentials: a crash
// leaves the old or the new credentials, never a mix.

import (
	"fmt"
	"path"

	"github.com/mirrord/mirrord/auth"
	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

const scramCredentialsName = "scram-credentials"

func (n *Node) openScramCredentials() error {
	file := n.nodeFile(scramCredentialsName)
	data, _, err := file.Load()
	if err != nil {
		return fmt.Errorf("broker: %s: %w", scramCredentialsName, err)
	}
	n.scram, err = auth.OpenScramCredentials(data, file.Save)
	if err != nil {
		return fmt.Errorf("broker: %s: %w", scramCredentialsName, err)
	}
	return nil
}

// ScramCredentials is the node's SCRAM credential store: the listener's
// SCRAM mechanisms read it, DescribeUserScramCredentials and
// AlterUserScramCredentials manage it.
func (n *Node) ScramCredentials() *auth.ScramCredentials { return n.scram }

// nodeFile is one small file of the node's data directory, read whole and
// replaced whole with logstore.WriteFileAtomic (the ACLs' acl.Store, the
// SCRAM credentials).
type nodeFile struct {
	fs        vfs.FS
	dir, name string
}

func (n *Node) nodeFile(name string) nodeFile { return nodeFile{n.cfg.FS, n.cfg.DataDir, name} }

// Load returns the file's contents; ok is false when there is none.
func (f nodeFile) Load() (data []byte, ok bool, err error) {
	return logstore.ReadFile(f.fs, path.Join(f.dir, f.name))
}

// Save replaces the file durably.
func (f nodeFile) Save(data []byte) error {
	return logstore.WriteFileAtomic(f.fs, f.dir, f.name, data)
}
