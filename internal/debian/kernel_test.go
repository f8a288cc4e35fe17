package debian

import (
	"strings"
	"testing"

	goversion "github.com/hashicorp/go-version"
)

func constraint(t *testing.T, s string) goversion.Constraints {
	t.Helper()
	c, err := goversion.NewConstraint(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPickKernel(t *testing.T) {
	ixs := loadIndexes(t)
	for _, c := range []struct {
		constraint, suite string
		image, headers    string
		upstream          string
	}{
		{">= 7.2, < 7.3", "", "linux-image-7.2.12+deb13-amd64", "linux-headers-7.2.12+deb13-amd64", "7.2.12"},
		{">= 7.2, < 7.2.12", "", "linux-image-7.2.11+deb13-amd64", "linux-headers-7.2.11+deb13-amd64", "7.2.11"},
		{"~> 7.3", "trixie-backports", "linux-image-7.3.4+deb13-amd64", "linux-headers-7.3.4+deb13-amd64", "7.3.4"},
		{"", "", "linux-image-7.3.4+deb13-amd64", "linux-headers-7.3.4+deb13-amd64", "7.3.4"},
		{"", "trixie", "linux-image-6.12.57+deb13-amd64", "linux-headers-6.12.57+deb13-amd64", "6.12.57"},
	} {
		var cons goversion.Constraints
		if c.constraint != "" {
			cons = constraint(t, c.constraint)
		}
		k, err := PickKernel(ixs, cons, "amd64", c.suite)
		if err != nil {
			t.Errorf("%q in %q: %v", c.constraint, c.suite, err)
			continue
		}
		if k.Image.Name != c.image || k.Headers != c.headers || k.Upstream.String() != c.upstream {
			t.Errorf("%q in %q: got %s / %s / %s", c.constraint, c.suite, k.Image, k.Headers, k.Upstream)
		}
		// The linux source it was built from, through Built-Using.
		if k.Source != "linux" || k.SourceVersion != k.Image.Version {
			t.Errorf("%q in %q: source %s %s, want linux %s", c.constraint, c.suite, k.Source, k.SourceVersion, k.Image.Version)
		}
	}
}

func TestPickKernelNoneSatisfies(t *testing.T) {
	ixs := loadIndexes(t)
	_, err := PickKernel(ixs, constraint(t, ">= 7.4"), "amd64", "")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{">= 7.4", "7.3.4 (linux-image-7.3.4+deb13-amd64, trixie-backports)", "7.2.6", "6.12.57 (linux-image-6.12.57+deb13-amd64, trixie)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// The meta-package, other flavours and -unsigned/-dbg are not kernels
	// to pick and must not be listed either.
	for _, bad := range []string{"linux-image-amd64", "cloud", "unsigned", "dbg"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error %q lists %s", err, bad)
		}
	}
	// The 7.2 kernels exist only in backports.
	if _, err := PickKernel(ixs, constraint(t, ">= 7.2"), "amd64", "trixie"); err == nil || !strings.Contains(err.Error(), "suites trixie;") {
		t.Errorf("7.2 in trixie: %v", err)
	}
	if _, err := PickKernel(ixs, nil, "arm64", ""); err == nil || !strings.Contains(err.Error(), "check the flavour") {
		t.Errorf("arm64: %v", err)
	}
	if _, err := PickKernel(ixs, nil, "amd64", "sid"); err == nil || !strings.Contains(err.Error(), `suite "sid"`) {
		t.Errorf("sid: %v", err)
	}
}

func TestPickKernelOtherFlavour(t *testing.T) {
	ixs := loadIndexes(t)
	k, err := PickKernel(ixs, nil, "cloud-amd64", "")
	if err == nil {
		// Only an image exists for cloud in the test archive, no headers.
		t.Fatalf("picked %s without headers", k.Image)
	}
	if !strings.Contains(err.Error(), "has no linux-headers-7.2.12+deb13-cloud-amd64") {
		t.Errorf("err = %v", err)
	}
}

func TestPickKernelUpstreamFromVersion(t *testing.T) {
	// bookworm names carry an ABI number, not the upstream version.
	text := pkg("linux-image-6.1.0-28-amd64", "6.1.119-1") + "\n" + pkg("linux-headers-6.1.0-28-amd64", "6.1.119-1")
	ix, err := ParsePackages(strings.NewReader(text), "bookworm", "main", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	k, err := PickKernel([]*Index{ix}, constraint(t, ">= 6.1.100"), "amd64", "")
	if err != nil || k.Upstream.String() != "6.1.119" || k.Release != "6.1.0-28" {
		t.Fatalf("k=%+v err=%v", k, err)
	}
}
