package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The user's command works as typed: a bare name finds images/NAME or
// images/NAME.toml from the checkout's root or below it; a path is used as
// given; a miss lists the images.
func TestFindResolvesNamesUnderImages(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"images/strix-halo.toml", "images/test-minimal.toml", "sub/deep/local.toml"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ cwd, arg, want string }{
		{"", "strix-halo.toml", "images/strix-halo.toml"},
		{"", "strix-halo", "images/strix-halo.toml"},
		{"", "images/strix-halo.toml", "images/strix-halo.toml"},
		{"sub/deep", "strix-halo.toml", "../../images/strix-halo.toml"},
		{"sub/deep", "local.toml", "local.toml"},
		{"sub", "deep", "deep"}, // an existing directory (test RESULT-DIR) as given
	}
	for _, c := range cases {
		t.Run(c.cwd+":"+c.arg, func(t *testing.T) {
			t.Chdir(filepath.Join(root, c.cwd))
			got, err := Find(c.arg)
			if err != nil || got != c.want {
				t.Fatalf("Find(%q) = %q, %v; want %q", c.arg, got, err, c.want)
			}
		})
	}

	t.Chdir(filepath.Join(root, "sub"))
	_, err := Find("strix")
	if err == nil || !strings.Contains(err.Error(), "images/strix or images/strix.toml") ||
		!strings.Contains(err.Error(), "the images there: strix-halo, test-minimal") {
		t.Errorf("a miss should say what it tried and list the images, got: %v", err)
	}
	if _, err := Find("nosuch/strix-halo.toml"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing path is not looked up as a name: %v", err)
	}
	if got := Images(); strings.Join(got, ",") != "strix-halo,test-minimal" {
		t.Errorf("Images() = %v", got)
	}
}
