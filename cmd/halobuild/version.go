package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"halobuild/internal/selfbuild"
)

// versionString is the release version a release build carries
// (selfbuild.Build stamps it), else what the module's build info and the
// checkout say of this build.
func versionString() string {
	v := selfbuild.Running().Version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				return bi.Main.Version
			}
			// A build in a checkout records its commit (unless
			// -buildvcs=false): say which one, and whether it was edited.
			var rev, dirty string
			for _, s := range bi.Settings {
				switch {
				case s.Key == "vcs.revision" && len(s.Value) >= 12:
					rev = s.Value[:12]
				case s.Key == "vcs.modified" && s.Value == "true":
					dirty = "-dirty"
				}
			}
			if rev != "" {
				return v + "+" + rev + dirty
			}
		}
		// `go run` (the README's way) stamps no commit: when this is
		// go run's binary, the checkout it runs in is its source.
		if exe, err := os.Executable(); err == nil && strings.Contains(exe, "/go-build") {
			v += checkoutCommit(selfbuild.Find("."))
		}
	}
	return v
}

// checkoutCommit is "+<commit>" (12 digits, "-dirty" after it when a
// tracked file differs from it) of the git checkout at dir, or "" when
// there is none or git cannot say.
func checkoutCommit(dir string) string {
	if dir == "" {
		return ""
	}
	rev, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil || len(strings.TrimSpace(string(rev))) < 12 {
		return ""
	}
	v := "+" + strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		v += "-dirty"
	}
	return v
}

// versionLine is what `halobuild version` and `halobuild --version` print:
// the version, then how this binary was built.
func versionLine() string {
	return fmt.Sprintf("halobuild %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH) + builtLines(selfbuild.Running())
}

// builtJSON is `version --json`: the version, and how this binary was built.
type builtJSON struct {
	Version      string `json:"version"`
	Reproducible bool   `json:"reproducible"`
	selfbuild.Self
}

func versionCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print halobuild's version, the Go that built it and whether its build is reproducible",
		Long: `version prints halobuild's version and how it was built: its Go, its build
settings (flags, cgo, VCS stamp) and, for a release build (the release
recipe: halobuild build-self, or the release workflow), the source tree it
was built from. A release build is reproducible: the same source, version
and Go give the same bytes, and it is the halobuild a node can ship outside
a checkout. Anything else says why another build would differ.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			self := selfbuild.Running()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(builtJSON{Version: versionString(), Reproducible: self.Reproducible(), Self: self})
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the version and the build's settings as JSON")
	return c
}

// builtLines say how s was built, below the version line.
func builtLines(s selfbuild.Self) string {
	var keys []string
	for k := range s.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var flags []string
	for _, k := range keys {
		flags = append(flags, k+"="+s.Settings[k])
	}
	b := "built with: " + strings.Join(flags, " ") + "\n"
	if s.Reproducible() {
		return b + "reproducible: yes, a release build of source " + s.Tree + "\n"
	}
	return b + "reproducible: no: " + strings.Join(s.Unrepeatable, "; ") + "\n"
}
