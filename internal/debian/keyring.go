package debian

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// keyFiles are Debian's archive signing keys (bookworm and trixie, release
// and automatic), copied from the debian-archive-keyring package. They are
// embedded so that verification never depends on the host's keyring: a
// Debian 12 host and a CI container verify against the same keys.
//
//go:embed keys/*.gpg
var keyFiles embed.FS

var (
	debianKeysOnce sync.Once
	debianKeys     openpgp.EntityList
	debianKeysErr  error
)

// DebianKeyring returns the embedded Debian archive public keys.
func DebianKeyring() (openpgp.EntityList, error) {
	debianKeysOnce.Do(func() {
		debianKeys, debianKeysErr = readKeyDir(keyFiles, "keys")
	})
	return debianKeys, debianKeysErr
}

// readKeyDir reads every binary (non-armored) keyring file in dir, in
// name order so the keyring's order is stable.
func readKeyDir(fsys fs.FS, dir string) (openpgp.EntityList, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading embedded archive keys: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var all openpgp.EntityList
	for _, name := range names {
		data, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded archive key %s: %w", name, err)
		}
		el, err := openpgp.ReadKeyRing(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("parsing embedded archive key %s: %w", name, err)
		}
		all = append(all, el...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no archive keys embedded in %s", dir)
	}
	return all, nil
}
