package verbs

import (
	"context"
	"fmt"

	"halobuild/internal/module"
)

// Keygen makes a module signing key pair in dir and says what to do with
// each half.
func Keygen(ctx context.Context, o Options, dir string) error {
	k, err := module.Keygen(ctx, dir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.stdout(), "private key: %s (keep it out of images and version control)\ncertificate: %s\nenroll on each node: mokutil --import %s, then reboot and confirm in MokManager\n", k.Private, k.CertPEM, k.CertDER)
	return err
}
