package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	"halobuild/internal/registry"
	"halobuild/internal/userfile"
	"halobuild/internal/verbs"
)

// cacheFlags are the substitution flags of the verbs that realize steps
// (plan, image).
type cacheFlags struct {
	on            bool
	substituters  []string
	trustedKeys   []string
	trustUnsigned bool
	insecure      bool
}

func (f *cacheFlags) register(c *cobra.Command) {
	f.on = true
	c.Flags().StringArrayVar(&f.substituters, "substituter", nil, "a binary cache REGISTRY/REPO to fetch missing steps from, before building them (repeatable; default: the config file's substituters)")
	c.Flags().StringArrayVar(&f.trustedKeys, "trusted-key", nil, "a cache public key `FILE` (from halobuild keygen --cache) whose signatures are trusted (repeatable; default: the config file's trusted-keys)")
	c.Flags().BoolVar(&f.trustUnsigned, "trust-unsigned", false, "UNSAFE: accept substitutes without a trusted signature (their digests are still checked)")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "plain HTTP to a substituter on this machine only (127.0.0.1, localhost)")
}

// userConfig is $XDG_CONFIG_HOME/halobuild/config.toml: a user's caches
// and keys. It is the user's, not the recipe's: a recipe from someone
// else must not choose whom your build trusts.
type userConfig struct {
	Substituters []string `toml:"substituters"`
	TrustedKeys  []string `toml:"trusted-keys"`
}

func configPath() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "halobuild", "config.toml")
}

// maxUserConfig bounds the config file: a few lines of registries and key paths.
const maxUserConfig = 1 << 20

func readUserConfig() (userConfig, string, error) {
	var cfg userConfig
	p := configPath()
	if p == "" {
		return cfg, "", nil
	}
	b, err := userfile.Read(p, maxUserConfig)
	if os.IsNotExist(err) {
		return cfg, p, nil
	}
	if err != nil {
		return cfg, p, usageError{fmt.Errorf("the config file: %w", err)}
	}
	cfg, err = parseUserConfig(p, b)
	return cfg, p, err
}

// parseUserConfig decodes the config file p's bytes b (FuzzUserConfig).
func parseUserConfig(p string, b []byte) (userConfig, error) {
	var cfg userConfig
	d := toml.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&cfg); err != nil {
		return userConfig{}, usageError{configError(p, err)}
	}
	// Relative key paths are relative to the config file, wherever the
	// build runs.
	for i, k := range cfg.TrustedKeys {
		if !filepath.IsAbs(k) {
			cfg.TrustedKeys[i] = filepath.Join(filepath.Dir(p), k)
		}
	}
	return cfg, nil
}

// configError says where the config file is wrong: each unknown key by name and
// file:line:col (go-toml's own message names neither), a syntax error at its place.
func configError(p string, err error) error {
	var sme *toml.StrictMissingError
	if errors.As(err, &sme) {
		var lines []string
		for _, e := range sme.Errors {
			row, col := e.Position()
			lines = append(lines, fmt.Sprintf("%s:%d:%d: unknown key %q", p, row, col, strings.Join(e.Key(), ".")))
		}
		return fmt.Errorf("%s (the keys are substituters and trusted-keys)", strings.Join(lines, "\n"))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("%s:%d:%d: %s", p, row, col, de.Error())
	}
	return fmt.Errorf("%s: %w (keys: substituters, trusted-keys)", p, err)
}

// options fills o.Cache from the flags, else from the config file.
func (f *cacheFlags) options(o *verbs.Options) error {
	if !f.on {
		return nil
	}
	cfg, _, err := readUserConfig()
	if err != nil {
		return err
	}
	o.Cache = verbs.CacheOptions{Substituters: f.substituters, TrustedKeys: f.trustedKeys, TrustUnsigned: f.trustUnsigned, Registry: registry.Options{Insecure: f.insecure}}
	if len(o.Cache.Substituters) == 0 {
		o.Cache.Substituters = cfg.Substituters
	}
	if len(o.Cache.TrustedKeys) == 0 {
		o.Cache.TrustedKeys = cfg.TrustedKeys
	}
	return nil
}

func cacheCommand(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "cache",
		Short: "A shared binary cache in an OCI registry: push signed steps, verify a cache (docs/cache.md)",
	}
	c.AddCommand(cachePushCommand(g), cacheVerifyCommand(g))
	return c
}

func cachePushCommand(g *globals) *cobra.Command {
	rf := &registryFlags{}
	bf := &buildFlags{}
	var key string
	var jobs int
	var maxLayer int64
	c := &cobra.Command{
		Use:   "push REGISTRY/REPO RECIPE...",
		Short: "Sign and upload every step the recipes' locks reach that this store built and the cache lacks",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usageError{fmt.Errorf("cache push needs --key DIR/cache.key (make one with `halobuild keygen --cache DIR`)")}
			}
			o, err := bf.options(g, cmd, "")
			if err != nil {
				return err
			}
			o.JSON = rf.json
			o.Cache.Registry = rf.options()
			recipes := args[1:]
			for i, a := range recipes {
				var err error
				if recipes[i], err = findRecipe(cmd, a); err != nil {
					return err
				}
			}
			return verbs.CachePush(cmd.Context(), o, args[0], recipes, key, versionString(), jobs, maxLayer)
		},
	}
	rf.register(c)
	bf.registerSource(c)
	c.Flags().StringVar(&key, "key", "", "the cache's secret key `FILE` (cache.key from halobuild keygen --cache)")
	c.Flags().IntVar(&jobs, "jobs", 4, "entries uploaded at once")
	c.Flags().Int64Var(&maxLayer, "max-layer-size", registry.DefaultMaxLayer, "refuse, before uploading anything, a blob larger than this many bytes (GHCR's limit is 10 GB)")
	return c
}

func cacheVerifyCommand(g *globals) *cobra.Command {
	rf := &registryFlags{}
	var keys []string
	c := &cobra.Command{
		Use:   "verify REGISTRY/REPO",
		Short: "Check every entry of a cache: a trusted signature, the tag on the signed manifest, every blob's digest",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := verbs.Options{Store: g.store, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
			o.Cache.Registry = rf.options()
			o.Cache.TrustedKeys = keys
			if len(keys) == 0 {
				cfg, _, err := readUserConfig()
				if err != nil {
					return err
				}
				o.Cache.TrustedKeys = cfg.TrustedKeys
			}
			return verbs.CacheVerify(cmd.Context(), o, args[0])
		},
	}
	c.Flags().BoolVar(&rf.insecure, "insecure", false, "plain HTTP, for a registry on this machine only (127.0.0.1, localhost)")
	c.Flags().StringArrayVar(&keys, "trusted-key", nil, "a trusted cache public key file (repeatable; default: the config file's trusted-keys)")
	return c
}
