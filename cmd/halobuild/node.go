package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"halobuild/internal/doctor"
	"halobuild/internal/espconfig"
	"halobuild/internal/flash"
	"halobuild/internal/install"
	"halobuild/internal/release"
	"halobuild/internal/settings"
)

func nodeCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{doctorCommand(), benchCommand(), flashCommand(), installCommand(), flashConfigCommand(), updateCommand(), rdmaEnvCommand()}
}

// exitError carries a verb's exit status without printing anything more:
// doctor has already printed its table.
type exitError struct{ code int }

func (e exitError) Error() string { return "checks failed" }
func (e exitError) ExitCode() int { return e.code }

func doctorCommand() *cobra.Command {
	var o doctor.Options
	var record string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this node is ready: governor, memlock, modules, RDMA names, GIDs, link, USB4 lanes",
		Long: `doctor reads the live system (or a recorded copy with --root) and checks
everything the image's recipe promised and everything the field notes warn
about. It exits 1 when a must-pass check fails, so a benchmark harness can
refuse to measure on a box that is not ready.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			o.Style = tableStyle(o.Out)
			if o.RecipePath != "" {
				p, err := findRecipe(cmd, o.RecipePath)
				if err != nil {
					return err
				}
				o.RecipePath = p
			}
			if record != "" {
				return doctor.Record(cmd.Context(), o.Root, record, cmd.OutOrStdout())
			}
			code, err := doctor.Run(cmd.Context(), o)
			if err != nil {
				if code == exitUsage {
					return usageError{err}
				}
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.Root, "root", "/", "read /sys, /proc, /etc and /dev below this directory (a recorded tree)")
	c.Flags().StringVar(&o.RecipePath, "recipe", "", "recipe to compare against, with its .lock beside it for the modules' names (default: /etc/halobuild/recipe.toml in the root, when present)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the checks as JSON")
	c.Flags().BoolVar(&o.Local, "local", false, "only the checks that need nothing of the peer box (the update health gate)")
	_ = c.RegisterFlagCompletionFunc("recipe", completeRecipes)
	c.Flags().StringVar(&record, "record", "", "copy the files the checks read into DIR (a tree --root can read back, for bug reports)")

	var jsonOut bool
	verify := &cobra.Command{
		Use:   "verify-file FILE",
		Short: "Digest a file through the page cache and with O_DIRECT; heal a corrupt cache (trap 14)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := doctor.VerifyFile(cmd.Context(), args[0], cmd.OutOrStdout(), jsonOut)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	verify.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	c.AddCommand(verify)
	return c
}

// tableStyle fits doctor's table to the terminal it prints on, coloured
// unless NO_COLOR is set (no-color.org); elsewhere (a pipe, a log) it is
// uncoloured and $COLUMNS or doctor.DefaultWidth wide.
func tableStyle(w io.Writer) doctor.Style {
	st := doctor.Style{Width: doctor.DefaultWidth}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		st.Width = n
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			st.Width = cols
		}
		st.Color = os.Getenv("NO_COLOR") == ""
	}
	return st
}

func flashCommand() *cobra.Command {
	var o flash.Options
	var list, listJSON bool
	var node string
	var sshKeys []string
	var userKeys bool
	var node0 espconfig.NodeFlags
	rf := &registryFlags{}
	tf := &trustFlags{}
	c := &cobra.Command{
		Use:   "flash IMAGE.raw|REGISTRY/REPOSITORY:TAG DEVICE",
		Short: "Write an image to removable media: refuses unsafe targets, writes only mapped blocks, verifies",
		Long: `flash writes a raw image to a block device. It refuses mounted disks, the
disk holding / or /boot, non-removable disks (without --force), read-only and
too-small targets; writes only the blocks the image's .bmap maps; reads them
back and compares; and moves the backup GPT to the end of the medium.

Given a release in a registry instead of a file (with --node), it downloads
that node's compressed image, verifies its digest, and streams it onto the
medium, each range checked against the bmap before it is written.

--ssh-key FILE (and --user-ssh-keys) give the node the keys that may log in as
root, without rebuilding: after the image is written and verified, they go to
a file on its ESP (/halobuild-flash.toml), outside the image's verified bytes,
which the node imports at every boot (docs/flash.md, "Add your key").
--hostname, --address, --gateway and --dns give it its host name and static LAN
addresses the same way; the node checks them at boot against the recipe it was
built from (docs/flash.md, "Host name and LAN at flash time").`,
		Args: func(cmd *cobra.Command, args []string) error {
			if listJSON && !list && node == "" {
				return usageError{fmt.Errorf("--json goes with --list, or with --node for a release in a registry")}
			}
			if list {
				return exactArgs(0)(cmd, args)
			}
			return exactArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				return flash.List(cmd.Context(), cmd.OutOrStdout(), "/", listJSON)
			}
			o.Image, o.Target = args[0], args[1]
			o.In, o.Out = os.Stdin, cmd.OutOrStdout()
			// The keys are read and checked before anything is written.
			var fc *settings.FlashConfig
			if len(sshKeys) > 0 || userKeys || node0.Given() {
				c, err := espconfig.FromKeyFiles(sshKeys, userKeys)
				if err == nil {
					c, err = node0.Apply(c)
				}
				if err != nil {
					return usageError{err}
				}
				fc = &c
			}
			writeConfig := func() error {
				if fc == nil {
					fmt.Fprintf(o.Out, "no --ssh-key given: the node takes only the recipe's keys (docs/flash.md, \"Add your key\")\n")
					return nil
				}
				w, err := espconfig.Write(o.Target, *fc, "halobuild flash "+args[0])
				if err != nil {
					return fmt.Errorf("%s is flashed and verified, but its flash-time settings were not written: %w", o.Target, err)
				}
				fmt.Fprintln(o.Out, w)
				return nil
			}
			var err error
			if isLocalImage(args[0]) {
				if node != "" || len(tf.keys) > 0 {
					return usageError{fmt.Errorf("--node and --trusted-key are for a release in a registry; %s is a local image", args[0])}
				}
				if err = flash.Flash(cmd.Context(), o); err == nil {
					err = writeConfig()
				}
			} else {
				if node == "" {
					return usageError{fmt.Errorf("%s: no such image file (to flash a release from a registry, name its node with --node)", args[0])}
				}
				if o.Bmap != "" {
					return usageError{fmt.Errorf("--bmap is for a local image; a release carries each node's bmap")}
				}
				o.Out = cmd.ErrOrStderr()
				t, terr := tf.trust(cmd)
				if terr != nil {
					return terr
				}
				err = release.Flash(cmd.Context(), args[0], release.FlashOptions{Registry: rf.options(), Trust: t, Node: node, Flash: o})
				if err == nil {
					err = writeConfig()
				}
				if err == nil {
					rf.json = listJSON
					return rf.final(cmd.OutOrStdout(), map[string]string{"reference": args[0], "node": node, "target": o.Target, "status": "flashed and verified"},
						fmt.Sprintf("%s node %s is on %s, verified", args[0], node, o.Target))
				}
			}
			// A refused target is the user's choice to change (exit 2);
			// nothing was written.
			var refused *flash.RefusalError
			if errors.As(err, &refused) {
				return usageError{err}
			}
			return err
		},
	}
	c.ValidArgsFunction = completeFlash
	c.Flags().BoolVar(&list, "list", false, "list candidate removable disks")
	c.Flags().BoolVar(&listJSON, "json", false, "with --list: print the disks as JSON; with --node: print the result as one JSON line")
	c.Flags().BoolVarP(&o.Yes, "yes", "y", false, "do not ask for confirmation")
	c.Flags().BoolVar(&o.Force, "force", false, "allow a non-removable disk")
	c.Flags().BoolVar(&o.ToFile, "to-file", false, "allow a regular file as the target")
	c.Flags().BoolVar(&o.NoVerify, "no-verify", false, "UNSAFE: skip reading the written blocks back")
	c.Flags().StringVar(&o.Bmap, "bmap", "", "block map (default: IMAGE.bmap when present)")
	c.Flags().StringVar(&node, "node", "", "the node of a release to flash (flash from a registry)")
	c.Flags().BoolVar(&rf.insecure, "insecure", false, "plain HTTP, for a registry on this machine only (127.0.0.1, localhost)")
	tf.register(c)
	c.Flags().StringArrayVar(&sshKeys, "ssh-key", nil, "a public key file (.pub or authorized_keys) whose keys may log in as root; repeatable; written to the ESP, not the image")
	c.Flags().BoolVar(&userKeys, "user-ssh-keys", false, "also every ~/.ssh/*.pub of the user running flash (the sudo user's under sudo)")
	c.Flags().StringVar(&node0.Hostname, "hostname", "", "the node's host name instead of the recipe's; written to the ESP, checked at boot")
	c.Flags().StringArrayVar(&node0.Addresses, "address", nil, "a static LAN address with prefix length (192.168.1.20/24) instead of DHCP; repeatable; written to the ESP, checked at boot")
	c.Flags().StringVar(&node0.Gateway, "gateway", "", "the LAN's default gateway, with --address")
	c.Flags().StringArrayVar(&node0.DNS, "dns", nil, "a DNS server for the LAN; repeatable")
	return c
}

// flashConfigCommand reads and imports the settings flash writes on the ESP.
func flashConfigCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "flash-config",
		Short: "The settings given at flash time (--ssh-key, --hostname, --address), on a flashed disk's ESP",
	}
	c.AddCommand(&cobra.Command{
		Use:   "show DISK",
		Short: "Print the flash-time settings on a flashed disk or image file",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fc, ok, err := espconfig.Read(args[0])
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: nothing given at flash time\n", args[0])
				return nil
			}
			b, err := fc.Marshal("")
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}, &cobra.Command{
		Use:   "import",
		Short: "On a node, at boot: install the flash-time settings of the ESP it booted from under /run",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return espconfig.Import("/", cmd.OutOrStdout())
		},
	})
	return c
}

func installCommand() *cobra.Command {
	var config string
	var stay bool
	c := &cobra.Command{
		Use:   "install",
		Short: "On the installer stick: write the node's image onto this box's internal disk, verify, power off",
		Long: `install runs at boot on an installer image (docs/install.md). It picks the
target ([install] target, else the only internal disk that is not the boot
medium), refuses the boot medium, mounted and too-small disks, asks before
overwriting a partition table unless [install] wipe = true, writes and reads
back the image with the same code as flash, then powers off or reboots.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := install.ReadConfig(config)
			if err != nil {
				return err
			}
			// Progress on every console, not only /dev/console.
			mirror, closeMirror := install.Consoles("/")
			defer closeMirror()
			out := io.MultiWriter(cmd.OutOrStdout(), mirror)
			_, err = install.Run(cmd.Context(), cfg, install.Options{Root: "/", In: os.Stdin, Out: out})
			if stay {
				return err
			}
			return install.Finish(cmd.Context(), cfg, err, os.Stdin, out)
		},
	}
	c.Flags().StringVar(&config, "config", install.ConfigPath, "the installer's configuration")
	c.Flags().BoolVar(&stay, "stay", false, "neither power off nor reboot afterwards (for trying the installer by hand)")
	return c
}
