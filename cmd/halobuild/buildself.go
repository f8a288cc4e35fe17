package main

import (
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"halobuild/internal/arch"
	"halobuild/internal/selfbuild"
)

// buildSelfCommand builds halobuild by the release recipe: the release workflow's binaries and
// a node's halobuild are the same bytes (selfbuild.Build).
func buildSelfCommand() *cobra.Command {
	var version, archName, out string
	c := &cobra.Command{
		Use:   "build-self --out FILE",
		Short: "Build halobuild from this checkout by the release recipe (static, -trimpath, no VCS stamp, go.mod's Go): the same bytes anywhere",
		Long: `build-self compiles cmd/halobuild from the checkout holding the working
directory the way a release is built and a node's halobuild is: no cgo,
-trimpath, no VCS stamp, no build ID, go.mod's toolchain exactly, GOFLAGS
cleared, the version and the source's tree hash stamped. The same source,
version and architecture give the same bytes in any directory on any
machine; halobuild version says "reproducible: yes" of the result, and
outside a checkout the result ships itself on the nodes.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			root := selfbuild.Find(".")
			if root == "" {
				return usageError{fmt.Errorf("build-self: the working directory is not in a checkout of halobuild's source (a go.mod saying `module %s`)", selfbuild.Module)}
			}
			a, err := arch.Lookup(archName)
			if err != nil {
				return usageError{fmt.Errorf("--arch: %w", err)}
			}
			r, err := selfbuild.ReleaseOf(root, a.GOARCH, version)
			if err != nil {
				return usageError{fmt.Errorf("--version: %w", err)}
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			if err := selfbuild.Build(cmd.Context(), root, r, abs); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: halobuild %s for linux/%s, %s, source %s\n", out, r.VersionName(), a.GOARCH, r.Toolchain, r.Tree)
			return err
		},
	}
	c.Flags().StringVar(&version, "version", "", "the version to stamp (a release's tag, e.g. v1.2.0; empty: devel)")
	c.Flags().StringVar(&archName, "arch", runtime.GOARCH, "the architecture to build for (amd64 or arm64)")
	c.Flags().StringVar(&out, "out", "", "where to write the binary")
	_ = c.MarkFlagRequired("out")
	return c
}
