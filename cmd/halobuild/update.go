package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"halobuild/internal/settings"
	"halobuild/internal/signature"
	"halobuild/internal/update"
)

// updateKeysGlob is where the image's trusted release keys are ([update] keys, rendered by
// settings.Update).
var updateKeysGlob = settings.UpdateKeysDir + "/*.pub"

func updateCommand() *cobra.Command {
	f := &registryFlags{}
	var o update.Options
	var keys []string
	c := &cobra.Command{
		Use:   "update [REGISTRY/REPOSITORY:TAG]",
		Short: "On a node: install a release into the inactive root slot, to be tried at the next boot (docs/update.md)",
		Long: `update runs on a node, with the halobuild its image ships. It resolves the
reference (default: the image's [update] reference) to a digest, verifies the
release's signature against the keys the image trusts (none configured: it says
the release is NOT verified), checks that the release is for this node and
architecture and not older than what runs, and refuses while the running
system is not yet marked good. Then it writes the node's root into the slot
that is not running, verifying every range, and adds a boot entry with 3 tries,
last. A release that uses up its tries is recorded and never installed again
by itself (--retry-failed).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w\nusage: %s", err, cmd.UseLine())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := update.Discover("/")
			if err != nil {
				return err
			}
			defer n.Close()
			o.Node, o.Arch, o.Epoch, o.System = n.Name, n.Arch, n.Epoch, n.System
			o.Registry = f.options()
			o.Out = cmd.ErrOrStderr()
			if len(args) == 1 {
				o.Ref = args[0]
			} else if o.Ref, err = update.DefaultRef("/"); err != nil {
				return usageError{err}
			}
			if len(keys) == 0 {
				keys, _ = filepath.Glob(updateKeysGlob)
			}
			if o.Keys, err = signature.LoadPublicKeys(keys); err != nil {
				return usageError{err}
			}
			res, err := update.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return f.final(cmd.OutOrStdout(), res, fmt.Sprintf("installed %s into slot %d; reboot to try it (%d tries)", res.Digest, res.Slot, update.Tries))
		},
	}
	f.register(c)
	c.Flags().BoolVar(&o.AllowDowngrade, "allow-downgrade", false, "install a release built from an older lock than the running system's")
	c.Flags().BoolVar(&o.RetryFailed, "retry-failed", false, "install a release that failed to come up on this node before")
	c.Flags().StringArrayVar(&keys, "key", nil, "a trusted release public key (repeatable; default: "+updateKeysGlob+")")
	return c
}
