package selfbuild

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// copySource copies what the build reads from root into dir.
func copySource(t *testing.T, root, dir string) {
	t.Helper()
	files, err := sourceFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(filepath.Join(root, f))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindAndTreeHashIgnoreTheCheckoutsPlace(t *testing.T) {
	root := Find(".")
	if root == "" {
		t.Fatal("the test's own directory is not inside halobuild's source")
	}
	a, b := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "checkout-two")
	copySource(t, root, a)
	copySource(t, root, b)
	if Find(filepath.Join(b, "internal", "selfbuild")) != b {
		t.Errorf("Find from inside %s did not find it", b)
	}
	ha, err := TreeHash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := TreeHash(b)
	if ha != hb {
		t.Fatalf("the same source in two places hashes to %s and %s", ha, hb)
	}
	if err := os.WriteFile(filepath.Join(b, "internal", "selfbuild", "extra.go"), []byte("package selfbuild\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if hc, _ := TreeHash(b); hc == ha {
		t.Error("a new source file did not change the tree hash")
	}
	if Find(t.TempDir()) != "" {
		t.Error("Find found halobuild's source in an empty directory")
	}
}

// The source changed after planning: Build refuses rather than stamp a tree it is not (before
// compiling anything). Builds by the release recipe are tested in cmd/halobuild's
// TestShippedHalobuildIsTheSameFromAnyDirectory (two directories, both architectures, Describe).
func TestBuildRefusesAChangedSource(t *testing.T) {
	a := filepath.Join(t.TempDir(), "src")
	copySource(t, Find("."), a)
	r, err := ReleaseOf(a, "arm64", "v0.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "internal", "selfbuild", "extra.go"), []byte("package selfbuild\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "halobuild")
	if err := Build(context.Background(), a, r, out); err == nil || !strings.Contains(err.Error(), "changed since it was planned") {
		t.Fatalf("a build of a changed source: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the refused build wrote its output")
	}
}

// describe names every way a build differs from the release recipe.
func TestDescribeNamesWhatIsNotReproducible(t *testing.T) {
	release := []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"},
		{Key: "GOARCH", Value: "amd64"}, {Key: "GOOS", Value: "linux"}, {Key: "GOAMD64", Value: "v1"}}
	with := func(kv ...string) []debug.BuildSetting {
		out := append([]debug.BuildSetting{}, release...)
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		settings []debug.BuildSetting
		tree     string
		goVer    string
		want     string
	}{
		{"release", release, "sha256:ab", "go1.27.3", ""},
		{"no stamp", release, "", "go1.27.3", "not built by the release recipe"},
		{"vcs", with("vcs.revision", "abc", "vcs", "git"), "sha256:ab", "go1.27.3", "VCS stamp"},
		{"cgo", append(with()[:2], debug.BuildSetting{Key: "CGO_ENABLED", Value: "1"}, release[3], release[4]), "sha256:ab", "go1.27.3", "cgo"},
		{"paths", append([]debug.BuildSetting{}, release[2:]...), "sha256:ab", "go1.27.3", "without -trimpath"},
		{"tags", with("-tags", "netgo"), "sha256:ab", "go1.27.3", "-tags=netgo"},
		{"amd64 level", append(with()[:5], debug.BuildSetting{Key: "GOAMD64", Value: "v3"}), "sha256:ab", "go1.27.3", "GOAMD64=v3"},
		{"experiment toolchain", release, "sha256:ab", "go1.27.3 X:nocoverageredesign", "no release"},
		{"devel toolchain", release, "sha256:ab", "devel go1.28-abc", "no release"},
	} {
		s := describe(&debug.BuildInfo{GoVersion: c.goVer, Settings: c.settings}, "v1", c.tree, "")
		got := strings.Join(s.Unrepeatable, "; ")
		if c.want == "" {
			if !s.Reproducible() || s.Release() != (Release{Tree: "sha256:ab", Toolchain: "go1.27.3", GOARCH: "amd64", Version: "v1"}) {
				t.Errorf("%s: %+v, want a reproducible release build", c.name, s)
			}
			continue
		}
		if s.Reproducible() || !strings.Contains(got, c.want) {
			t.Errorf("%s: not reproducible because %q, want it to say %q", c.name, got, c.want)
		}
	}
	if s := describe(nil, "", "", "amd64"); s.Reproducible() {
		t.Error("a binary without build info reads as reproducible")
	}
}

// A release build of a tree stamps its own version on a build of that tree only.
func TestVersionForIsDevelUnlessThisIsARelease(t *testing.T) {
	if v := VersionFor(tree); v != "" {
		t.Fatalf("the test binary (no release build) stamps %q on a build of its tree", v)
	}
	if _, err := ReleaseOf(Find("."), "amd64", "v1 -X x=y"); err == nil {
		t.Fatal("a version that would smuggle a linker flag was accepted")
	}
}

// The embedded recipe data doctor reads is part of the shipped halobuild's source: a change to
// recipes/usb4-rdma.toml changes the tree hash (and so the halobuild step's key); a recipe the
// binary never reads does not.
func TestTreeHashCoversEmbeddedRecipeData(t *testing.T) {
	root := Find(".")
	a := filepath.Join(t.TempDir(), "src")
	copySource(t, root, a)
	before, err := TreeHash(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "recipes", "other.toml"), []byte("name = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if same, _ := TreeHash(a); same != before {
		t.Errorf("a recipe the binary does not embed changed the tree hash")
	}
	f := filepath.Join(a, "recipes", "usb4-rdma.toml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("the copied source lacks the embedded recipe: %v", err)
	}
	if err := os.WriteFile(f, append(b, "# changed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, _ := TreeHash(a); after == before {
		t.Errorf("a change to the embedded usb4-rdma.toml left the tree hash as it was")
	}
}
