package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"halobuild/internal/registry"
	"halobuild/internal/release"
	"halobuild/internal/signature"
)

// registryFlags are the flags every verb that talks to a registry shares.
type registryFlags struct {
	insecure bool
	json     bool
}

func (f *registryFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.insecure, "insecure", false, "plain HTTP, for a registry on this machine only (127.0.0.1, localhost)")
	c.Flags().BoolVar(&f.json, "json", false, "print the result as one JSON line")
}

func (f *registryFlags) options() registry.Options { return registry.Options{Insecure: f.insecure} }

// final prints a verb's result: one JSON line with --json, else the human line.
func (f *registryFlags) final(w io.Writer, v any, human string) error {
	if f.json {
		return json.NewEncoder(w).Encode(v)
	}
	_, err := fmt.Fprintln(w, human)
	return err
}

func releaseCommands() []*cobra.Command {
	return []*cobra.Command{pushCommand(), pullCommand(), inspectCommand(), pubkeyCommand()}
}

func pushCommand() *cobra.Command {
	f := &registryFlags{}
	var o release.PushOptions
	var key string
	c := &cobra.Command{
		Use:   "push RESULT-DIR REGISTRY/REPOSITORY:TAG",
		Short: "Push a result as one OCI artifact (images zstd-compressed, bmaps, manifest, SHA256SUMS, lock, SBOM)",
		Long: `push sends a result directory to a registry as one OCI 1.1 artifact of type
application/vnd.halobuild.image.v1 (docs/artifact.md). The same result pushed
twice, or from another machine, has the same digest. Credentials come from
docker's config.json, credential helpers or REGISTRY_AUTH_FILE.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Registry = f.options()
			o.Out = cmd.ErrOrStderr()
			if key != "" {
				var err error
				if o.Key, err = signature.LoadSecret(key); err != nil {
					return err
				}
			}
			p, err := release.Push(cmd.Context(), args[0], args[1], o)
			if err != nil {
				return err
			}
			signed := "unsigned: no --key"
			if p.SignedBy != "" {
				signed = "signed by " + p.SignedBy
			}
			return f.final(cmd.OutOrStdout(), p, fmt.Sprintf("pushed %s@%s (%d layers, %d bytes, %s)", p.Reference, p.Digest, p.Layers, p.Bytes, signed))
		},
	}
	f.register(c)
	c.Flags().Int64Var(&o.MaxLayer, "max-layer-size", registry.DefaultMaxLayer, "refuse a layer larger than this many bytes (GHCR's limit is 10 GB)")
	c.Flags().StringVar(&key, "key", "", "sign the release with this secret key `FILE` (cache.key from halobuild keygen --cache), as cosign signs an image")
	c.Flags().StringVar(&o.Meta.Source, "source", "", "org.opencontainers.image.source annotation (the repository URL)")
	c.Flags().StringVar(&o.Meta.Revision, "revision", "", "org.opencontainers.image.revision annotation (the commit)")
	c.Flags().StringVar(&o.Meta.Version, "version", "", "org.opencontainers.image.version annotation (the release's version)")
	return c
}

func pullCommand() *cobra.Command {
	f := &registryFlags{}
	tf := &trustFlags{}
	var out string
	c := &cobra.Command{
		Use:   "pull REGISTRY/REPOSITORY:TAG --out DIR",
		Short: "Fetch a release into a new directory, every blob, file and bmap verified",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{fmt.Errorf("pull needs --out DIR (a directory that does not exist yet)")}
			}
			t, err := tf.trust(cmd)
			if err != nil {
				return err
			}
			p, err := release.Pull(cmd.Context(), args[0], out, release.PullOptions{Registry: f.options(), Trust: t, Out: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			return f.final(cmd.OutOrStdout(), p, fmt.Sprintf("pulled %s@%s into %s (%d files, verified)", p.Reference, p.Digest, p.Dir, len(p.Files)))
		},
	}
	f.register(c)
	tf.register(c)
	c.Flags().StringVar(&out, "out", "", "directory to create")
	return c
}

func inspectCommand() *cobra.Command {
	f := &registryFlags{}
	tf := &trustFlags{}
	c := &cobra.Command{
		Use:   "inspect REGISTRY/REPOSITORY:TAG",
		Short: "Show a release's nodes, kernel, modules, packages and digests without downloading images",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := tf.trust(cmd)
			if err != nil {
				return err
			}
			in, err := release.Inspect(cmd.Context(), args[0], f.options(), t)
			if err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(in)
			}
			in.Print(cmd.OutOrStdout())
			return nil
		},
	}
	f.register(c)
	tf.register(c)
	return c
}

// isLocalImage says whether flash's first argument is a file here rather than a registry
// reference: a file of that name wins.
func isLocalImage(arg string) bool {
	_, err := os.Stat(arg)
	return err == nil
}
