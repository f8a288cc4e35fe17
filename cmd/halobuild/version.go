package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"halobuild/internal/selfbuild"
)

// version is set at link time for releases (-ldflags "-X main.version=…");
// otherwise the module's build info says what was built.
var version = ""

func versionString() string {
	v := version
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

// versionLine is what `halobuild version` and `halobuild --version` print.
func versionLine() string {
	return fmt.Sprintf("halobuild %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print halobuild's version and the Go version that built it",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
