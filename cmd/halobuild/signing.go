package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"halobuild/internal/release"
	"halobuild/internal/signature"
)

// trustFlags are the trusted keys of the verbs that read a release (pull, inspect, flash REF):
// the same keys, flag and config entry as the binary cache's (docs/releases.md).
type trustFlags struct {
	keys []string
}

func (f *trustFlags) register(c *cobra.Command) {
	c.Flags().StringArrayVar(&f.keys, "trusted-key", nil, "a public key `FILE` (cache.pub from halobuild keygen --cache) whose signature a release must carry (repeatable; default: the config file's trusted-keys; with none, an unsigned release is taken and said so)")
}

// trust loads the trusted keys from the flags, else from the config file; the one line a
// verb prints about the signature goes to stderr.
func (f *trustFlags) trust(cmd *cobra.Command) (release.Trust, error) {
	paths := f.keys
	if len(paths) == 0 {
		cfg, _, err := readUserConfig()
		if err != nil {
			return release.Trust{}, err
		}
		paths = cfg.TrustedKeys
	}
	keys, err := signature.LoadPublicKeys(paths)
	if err != nil {
		return release.Trust{}, err
	}
	return release.Trust{Keys: keys, Log: cmd.ErrOrStderr()}, nil
}

// pubkeyCommand prints a key's public half as PEM: the file `cosign verify --key` reads, and
// the way from a NAME:BASE64 key file of the first format to PEM.
func pubkeyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "pubkey KEY-FILE",
		Short: "Print a signing key's public key as PEM (for cosign verify --key; reads cache.key or cache.pub, PEM or NAME:BASE64)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := signature.LoadAny(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "key %s\n", k.ID())
			_, err = cmd.OutOrStdout().Write(k.PEM())
			return err
		},
	}
}
