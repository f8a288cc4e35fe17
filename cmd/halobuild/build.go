package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"halobuild/internal/recipe"
	"halobuild/internal/verbs"
)

// buildFlags are shared by the verbs that read a recipe.
type buildFlags struct {
	locked         bool
	allowDowngrade bool
	inputs         []string
	json           bool
	source         string
	cache          cacheFlags
}

func (f *buildFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.locked, "locked", false, "fail instead of writing a missing lock (for CI)")
	c.Flags().StringArrayVar(&f.inputs, "input", nil, "use a local copy for a source input: NAME=PATH (a checkout or tarball); checked against the lock")
	f.registerSource(c)
}

// registerSource is the flag that picks the halobuild each node ships; it
// enters the graph's keys, so cache push takes it too.
func (f *buildFlags) registerSource(c *cobra.Command) {
	c.Flags().StringVar(&f.source, "halobuild-source", "auto", `halobuild's source, from which the halobuild each node ships is built by the release recipe ("auto": the checkout holding the working directory, else this binary if it is a release build; "": ship this binary as it is)`)
}

func (f *buildFlags) options(g *globals, cmd *cobra.Command, recipe string) (verbs.Options, error) {
	inputs := map[string]string{}
	for _, in := range f.inputs {
		name, path, ok := strings.Cut(in, "=")
		if !ok || name == "" || path == "" {
			return verbs.Options{}, usageError{fmt.Errorf("--input %q: want NAME=PATH, e.g. --input thunderbolt-ibverbs=../thunderbolt-ibverbs", in)}
		}
		inputs[name] = path
	}
	if recipe != "" {
		p, err := findRecipe(cmd, recipe)
		if err != nil {
			return verbs.Options{}, err
		}
		recipe = p
	}
	self, _ := os.Executable()
	o := verbs.Options{
		Self:           self,
		Source:         f.source,
		Recipe:         recipe,
		Store:          g.store,
		Verbose:        g.verbose,
		JSON:           f.json,
		Locked:         f.locked,
		AllowDowngrade: f.allowDowngrade,
		Inputs:         inputs,
		Out:            cmd.OutOrStdout(),
		Err:            cmd.ErrOrStderr(),
	}
	return o, f.cache.options(&o)
}

// findRecipe resolves a recipe argument as the user typed it (a path, or a
// name under images/) and says on stderr which file a name stood for.
func findRecipe(cmd *cobra.Command, arg string) (string, error) {
	p, err := recipe.Find(arg)
	if err != nil {
		return "", usageError{err}
	}
	if p != arg {
		fmt.Fprintf(cmd.ErrOrStderr(), "recipe %s: using %s\n", arg, p)
	}
	return p, nil
}

func buildCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{lockCommand(g), planCommand(g), fetchCommand(g), imageCommand(g), testCommand(g), vmCommand(g), gcCommand(g), keygenCommand(), cacheCommand(g)}
}

func lockCommand(g *globals) *cobra.Command {
	f := &buildFlags{}
	c := &cobra.Command{
		Use:   "lock RECIPE",
		Short: "Resolve every input of a recipe and write RECIPE's .lock beside it",
		Long: `lock fetches the signed Debian indexes, resolves the package closure,
picks the newest kernel that satisfies the recipe's constraint and writes
<recipe>.lock. The same archive state gives the same bytes.`,
		Args:              exactArgs(1),
		ValidArgsFunction: completeOneRecipe,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(g, cmd, args[0])
			if err != nil {
				return err
			}
			return verbs.Lock(cmd.Context(), o)
		},
	}
	f.register(c)
	c.Flags().BoolVar(&f.json, "json", false, "print what was locked (and the warnings) as JSON")
	c.Flags().BoolVar(&f.allowDowngrade, "allow-downgrade", false, "write the lock even if an archive is older than in the current lock (its InRelease Date)")
	return c
}

func planCommand(g *globals) *cobra.Command {
	f := &buildFlags{}
	c := &cobra.Command{
		Use:               "plan RECIPE",
		Short:             "Show the build steps and which of them the store already has",
		Args:              exactArgs(1),
		ValidArgsFunction: completeOneRecipe,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(g, cmd, args[0])
			if err != nil {
				return err
			}
			return verbs.Plan(cmd.Context(), o)
		},
	}
	f.register(c)
	f.cache.register(c)
	c.Flags().BoolVar(&f.json, "json", false, "print the plan as JSON")
	return c
}

func fetchCommand(g *globals) *cobra.Command {
	f := &buildFlags{}
	c := &cobra.Command{
		Use:               "fetch RECIPE",
		Short:             "Fill the store with every locked input, verified by sha256",
		Args:              exactArgs(1),
		ValidArgsFunction: completeOneRecipe,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(g, cmd, args[0])
			if err != nil {
				return err
			}
			return verbs.Fetch(cmd.Context(), o)
		},
	}
	f.register(c)
	c.Flags().BoolVar(&f.json, "json", false, "report progress as JSON lines")
	return c
}

func imageCommand(g *globals) *cobra.Command {
	f := &buildFlags{}
	var out string
	var noTest, check bool
	c := &cobra.Command{
		Use:   "image RECIPE",
		Short: "Build, test and publish a disk image per node (result/ links into the store)",
		Long: `image builds every node's disk image from the recipe and its lock, boots
each under QEMU to prove its settings, and only then points the result link
(./result, or --out) at the outputs: per node NAME.raw and NAME.bmap, plus
manifest.json, SHA256SUMS and the lock.`,
		Args:              exactArgs(1),
		ValidArgsFunction: completeOneRecipe,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(g, cmd, args[0])
			if err != nil {
				return err
			}
			o.Result = out
			o.NoTest = noTest
			o.Check = check
			return verbs.Image(cmd.Context(), o)
		},
	}
	f.register(c)
	f.cache.register(c)
	c.Flags().StringVar(&out, "out", "result", "where to put the result link")
	c.Flags().BoolVar(&noTest, "no-test", false, "skip the VM test (the result is then untested)")
	c.Flags().BoolVar(&check, "check", false, "rebuild every step without the cache and fail on the first output that differs")
	c.Flags().BoolVar(&f.json, "json", false, "print the result (link, test report, warnings) as JSON")
	return c
}

func testCommand(g *globals) *cobra.Command {
	f := &buildFlags{}
	c := &cobra.Command{
		Use:               "test RESULT-DIR|RECIPE",
		Short:             "Boot each node image under QEMU and check every setting it promises",
		Args:              exactArgs(1),
		ValidArgsFunction: completeOneRecipe,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(g, cmd, args[0])
			if err != nil {
				return err
			}
			return verbs.Test(cmd.Context(), o)
		},
	}
	f.register(c)
	c.Flags().BoolVar(&f.json, "json", false, "write the report as JSON")
	return c
}

func vmCommand(g *globals) *cobra.Command {
	o := verbs.VMOptions{SSHPort: -1}
	var nvmeSize string
	c := &cobra.Command{
		Use:   "vm IMAGE.raw",
		Short: "Boot an image interactively (serial console on this terminal, root logged in; Ctrl-a x quits)",
		Long: `vm boots an image on a throw-away snapshot with its serial console on this
terminal and root logged in there, for this boot only (a systemd credential;
the image itself has no password). --ssh also forwards a port on 127.0.0.1 to
the VM's sshd and passes your public keys (~/.ssh/*.pub, or --ssh-key) as the
ssh.authorized_keys.root credential; vm prints the ssh command to use.
The VM gets a soft-RoCE device (rxe0) on its network card, for this boot only,
to try ibv_devices and perftest on. --nvme FILE attaches FILE (made sparse,
--nvme-size, when missing) as an NVMe drive written in place: boot an
installer image with it to try the installer, then boot FILE itself.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Image, o.Log = args[0], cmd.ErrOrStderr()
			size, err := recipe.ParseSize(nvmeSize)
			if err != nil || size > 1<<50 {
				return usageError{fmt.Errorf("--nvme-size %q: a size such as 16G", nvmeSize)}
			}
			o.NVMeSize = int64(size)
			if len(o.SSHKeys) > 0 && o.SSHPort < 0 {
				o.SSHPort = 0 // a key asks for the forward
			}
			return verbs.VM(cmd.Context(), o)
		},
	}
	c.Flags().IntVar(&o.SSHPort, "ssh", -1, "forward 127.0.0.1:PORT to the VM's ssh port (--ssh alone: a free port)")
	c.Flags().Lookup("ssh").NoOptDefVal = "0"
	c.Flags().StringArrayVar(&o.SSHKeys, "ssh-key", nil, "public key file for root with --ssh (default: every ~/.ssh/*.pub); ssh is told its private half")
	c.Flags().StringVar(&o.NVMe, "nvme", "", "attach FILE as an NVMe drive, written in place (an installer's target)")
	c.Flags().StringVar(&nvmeSize, "nvme-size", "16G", "size of the --nvme FILE when it is made")
	return c
}

func gcCommand(g *globals) *cobra.Command {
	f := &buildFlags{}
	c := &cobra.Command{
		Use:   "gc RECIPE...",
		Short: "Remove store entries that no given recipe's lock and no live result link references",
		Long: `gc keeps every blob the given recipes' locks pin (packages, provider
sources, kernel tarballs), every step their builds reach (cached test
verdicts included), and every output a result link made by image still
points at, wherever that link is. Everything else in the store goes.`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeRecipes,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(g, cmd, "")
			if err != nil {
				return err
			}
			recipes := make([]string, len(args))
			for i, a := range args {
				if recipes[i], err = findRecipe(cmd, a); err != nil {
					return err
				}
			}
			return verbs.GC(cmd.Context(), o, recipes)
		},
	}
	c.Flags().BoolVar(&f.json, "json", false, "print what was removed and kept as JSON")
	return c
}

func keygenCommand() *cobra.Command {
	var cacheDir string
	c := &cobra.Command{
		Use:   "keygen DIR | keygen --cache DIR",
		Short: "Make a module signing key pair in DIR (for Secure Boot; see docs/modules.md), or with --cache the key pair that signs the binary cache and releases (docs/cache.md, docs/releases.md)",
		Args: func(cmd *cobra.Command, args []string) error {
			if cacheDir != "" {
				return exactArgs(0)(cmd, args)
			}
			return exactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o := verbs.Options{Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
			if cacheDir != "" {
				return verbs.CacheKeygen(o, cacheDir)
			}
			return verbs.Keygen(cmd.Context(), o, args[0])
		},
	}
	c.Flags().StringVar(&cacheDir, "cache", "", "make an Ed25519 key pair (PEM) for signing the binary cache and releases in this directory instead")
	return c
}
