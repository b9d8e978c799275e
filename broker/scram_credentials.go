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
)

const scramCredentialsName = "scram-credentials"

func (n *Node) openScramCredentials() error {
	data, _, err := logstore.ReadFile(n.cfg.FS, path.Join(n.cfg.DataDir, scramCredentialsName))
	if err != nil {
		return fmt.Errorf("broker: %s: %w", scramCredentialsName, err)
	}
	n.scram, err = auth.OpenScramCredentials(data, func(contents []byte) error {
		return logstore.WriteFileAtomic(n.cfg.FS, n.cfg.DataDir, scramCredentialsName, contents)
	})
	if err != nil {
		return fmt.Errorf("broker: %s: %w", scramCredentialsName, err)
	}
	return nil
}

// ScramCredentials is the node's SCRAM credential store: the listener's
// SCRAM mechanisms read it, DescribeUserScramCredentials and
// AlterUserScramCredentials manage it.
func (n *Node) ScramCredentials() *auth.ScramCredentials { return n.scram }
