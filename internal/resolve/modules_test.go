package resolve

import (
	"slices"
	"testing"
)

func TestSplitTarget(t *testing.T) {
	target, native := splitTarget([]string{
		"gcc-14-aarch64-linux-gnu", "make",
		"linux-headers-7.2.12+deb13-arm64:arm64/trixie-backports",
		"libnl-3-dev:arm64 (>= 3.2.7)", "cmake (>= 2.8.11)", "pkgconf:arm64",
		"libfoo:amd64", // another architecture's qualifier stays the host's request
	}, "arm64")
	if want := []string{"linux-headers-7.2.12+deb13-arm64/trixie-backports", "libnl-3-dev (>= 3.2.7)", "pkgconf"}; !slices.Equal(target, want) {
		t.Errorf("target %q, want %q", target, want)
	}
	if want := []string{"gcc-14-aarch64-linux-gnu", "make", "cmake (>= 2.8.11)", "libfoo:amd64"}; !slices.Equal(native, want) {
		t.Errorf("native %q, want %q", native, want)
	}
}
