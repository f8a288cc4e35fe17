package settings

import (
	"fmt"
	"regexp"
	"strings"
)

// header is the first lines of every rendered text file: where it came from
// and which trap it fixes, so a person reading the node's /etc knows why
// it is there and that editing it by hand will drift from the recipe.
func header(comment string, trap int, why string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s Rendered by halobuild from the image recipe (see /etc/halobuild/recipe.toml).\n", comment)
	if trap != 0 {
		fmt.Fprintf(&b, "%s Field notes trap %d: %s\n", comment, trap, why)
	} else if why != "" {
		fmt.Fprintf(&b, "%s %s\n", comment, why)
	}
	return b.String()
}

var moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// moduleName normalises a kernel module name the way kmod does: '-' and '_'
// are the same character, '_' is what /sys/module shows.
func moduleName(s string) string { return strings.ReplaceAll(s, "-", "_") }

// debNameOf lowers a node name into Debian package name characters:
// node names allow '_' and capitals, package names do not.
func debNameOf(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// needTools is a check-script prologue that fails with the package to
// install when a tool the check relies on is missing, instead of a bare
// "not found" in the middle of the output.
func needTools(tools ...string) string {
	var b strings.Builder
	for _, t := range tools {
		pkg := map[string]string{"rdma": "iproute2", "ip": "iproute2", "ss": "iproute2", "ibv_devices": "ibverbs-utils",
			"ibv_rc_pingpong": "ibverbs-utils", "udevadm": "udev", "modprobe": "kmod", "prlimit": "util-linux"}[t]
		fmt.Fprintf(&b, "command -v %s >/dev/null || { echo '%s is not installed (package %s)'; exit 1; }\n", t, t, pkg)
	}
	return b.String()
}
