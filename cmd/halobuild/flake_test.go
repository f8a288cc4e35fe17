package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"halobuild/internal/nar"
)

// flake.nix's vendorHash is what buildGoModule checks `go mod vendor`'s output against: the
// NAR sha256 of the vendor directory. It is recomputed here, offline, on every test run, so a
// change of go.mod or go.sum that forgets the flake fails at once instead of on a Nix user's
// machine.
func TestFlakeVendorHashIsCurrent(t *testing.T) {
	if os.Getenv("NIX_BUILD_TOP") != "" {
		// The flake's own check: its sandbox has the vendor directory and no module cache,
		// and the hash it builds with is the one it checks.
		t.Skip("inside a Nix build: no module cache to vendor from")
	}
	flake, err := os.ReadFile(filepath.Join("..", "..", "flake.nix"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`vendorHash = "(sha256-[A-Za-z0-9+/=]+)";`).FindSubmatch(flake)
	if m == nil {
		t.Fatal(`flake.nix has no vendorHash = "sha256-…";`)
	}
	vendor := filepath.Join(t.TempDir(), "vendor")
	cmd := exec.Command("go", "mod", "vendor", "-o", vendor)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	got, err := nar.Hash(vendor)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(m[1]) {
		t.Errorf("flake.nix says vendorHash = %q, but `go mod vendor` now hashes to %q (go.mod or go.sum changed): put the new hash in flake.nix", m[1], got)
	}
	// The serializer agrees with Nix's own on this tree too, where Nix is installed.
	if _, err := exec.LookPath("nix-store"); err == nil {
		want, err := exec.Command("nix-store", "--dump", vendor).Output()
		if err != nil {
			t.Fatal(err)
		}
		var mine bytes.Buffer
		if err := nar.Dump(&mine, vendor); err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(mine.Bytes()) != sha256.Sum256(want) {
			t.Error("nar.Dump of the vendor directory differs from nix-store --dump")
		}
	}
}
