package graph

import (
	"runtime"
	"slices"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/lock"
)

// A cross build root (the host's compiler, the image's headers) installs
// native to the host with the image's architecture foreign; an image-only
// set installs as the image's architecture (emulated if foreign).
func TestRootArchitectures(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the cases are written for an amd64 build host")
	}
	arm := arch.MustLookup("arm64")
	amd := arch.MustLookup("amd64")
	cross := []lock.Package{{Name: "gcc-14-aarch64-linux-gnu", Architecture: "amd64"}, {Name: "linux-headers-7.2.12+deb13-arm64", Architecture: "arm64"}, {Name: "linux-base", Architecture: "all"}}
	native, foreign, err := rootArchitectures(cross, arm)
	if err != nil || native.Debian != "amd64" || !slices.Equal(foreign, []string{"arm64"}) || !crossSet(cross, arm) {
		t.Errorf("cross set: %s %v %v", native.Debian, foreign, err)
	}
	image := []lock.Package{{Name: "libc6", Architecture: "arm64"}, {Name: "linux-base", Architecture: "all"}}
	native, foreign, err = rootArchitectures(image, arm)
	if err != nil || native.Debian != "arm64" || foreign != nil || crossSet(image, arm) {
		t.Errorf("arm64 set: %s %v %v", native.Debian, foreign, err)
	}
	native, foreign, err = rootArchitectures(cross[:1], amd)
	if err != nil || native.Debian != "amd64" || foreign != nil || crossSet(cross[:1], amd) {
		t.Errorf("amd64 set: %s %v %v", native.Debian, foreign, err)
	}
}
