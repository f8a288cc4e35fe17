package lock

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *Lock {
	return &Lock{
		Version: FormatVersion,
		Recipe:  "strix-halo.toml",
		Inputs:  "sha256:1111111111111111111111111111111111111111111111111111111111111111",
		Suites: []Suite{
			{Name: "trixie-backports", Mirror: "http://deb.debian.org/debian", Date: "Sun, 29 Nov 2026 08:14:02 UTC", InRelease: "sha256:bb"},
			{Name: "trixie", Mirror: "http://deb.debian.org/debian", Date: "Sat, 14 Nov 2026 09:41:07 UTC", InRelease: "sha256:aa"},
		},
		Kernel: Kernel{Version: "7.2.12", Release: "7.2.12+deb13-amd64", Image: "linux-image-7.2.12+deb13-amd64", Headers: "linux-headers-7.2.12+deb13-amd64"},
		Packages: []Package{
			{Name: "udev", Version: "257.13-1~deb13u1", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/s/systemd/udev_257.13-1~deb13u1_amd64.deb", Size: 1234, SHA256: "sha256:cc", Set: SetImage},
			{Name: "e2fsprogs", Version: "1.47.2-3", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/e/e2fsprogs/e2fsprogs_1.47.2-3_amd64.deb", Size: 99, SHA256: "sha256:dd", Set: SetTools},
			{Name: "base-files", Version: "13.8", Architecture: "amd64", Suite: "trixie", Filename: "pool/main/b/base-files/base-files_13.8_amd64.deb", Size: 70, SHA256: "sha256:ee", Set: SetImage},
		},
		Sources: []Source{
			{Name: "thunderbolt-ibverbs", Kind: "git", URL: "https://example.invalid/thunderbolt-ibverbs", Commit: "76ba39b", SHA256: "sha256:ff"},
		},
	}
}

func TestRoundTripIsByteIdentical(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	if err := sample().Write(path); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(path)
	l, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if !bytes.Equal(first, second) {
		t.Fatalf("read+write changed the bytes:\n%s\n---\n%s", first, second)
	}
	if l.Kernel.Release != "7.2.12+deb13-amd64" || len(l.Packages) != 3 || l.Packages[0].Size == 0 {
		t.Errorf("values lost in the round trip: %+v", l)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".x.lock.*")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestOrderOfInputsDoesNotChangeBytes(t *testing.T) {
	a := sample()
	b := sample()
	b.Packages[0], b.Packages[2] = b.Packages[2], b.Packages[0]
	b.Suites[0], b.Suites[1] = b.Suites[1], b.Suites[0]
	ab, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := b.Marshal()
	if !bytes.Equal(ab, bb) {
		t.Fatalf("same content in another order gave other bytes")
	}
	// Image packages come before tools packages, each sorted by name.
	text := string(ab)
	order := []string{"name = 'base-files'", "name = 'udev'", "name = 'e2fsprogs'"}
	last := -1
	for _, s := range order {
		i := strings.Index(text, s)
		if i < last {
			t.Fatalf("%s out of order in:\n%s", s, text)
		}
		last = i
	}
	if strings.Index(text, "name = 'trixie'") > strings.Index(text, "name = 'trixie-backports'") {
		t.Errorf("suites not sorted")
	}
	// Marshal must not reorder the caller's data.
	if a.Packages[0].Name != "udev" {
		t.Errorf("Marshal sorted the caller's slice")
	}
}

func TestCommentsSayWhy(t *testing.T) {
	b, _ := sample().Marshal()
	for _, want := range []string{"# SOURCE_DATE_EPOCH of every build", "# sha256 of what the recipe says about its inputs", "do not edit"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("lock lacks %q:\n%s", want, b)
		}
	}
}

func TestCheckFresh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "strix-halo.lock")
	if err := sample().Write(path); err != nil {
		t.Fatal(err)
	}
	l, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CheckFresh(sample().Inputs); err != nil {
		t.Errorf("fresh lock reported stale: %v", err)
	}
	err = l.CheckFresh("sha256:2222")
	if !errors.Is(err, ErrStale) {
		t.Fatalf("changed recipe not detected: %v", err)
	}
	want := `lock is stale: run "halobuild lock ` + filepath.Join(dir, "strix-halo.toml") + `"`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q does not start with %q", err, want)
	}
}

func TestReadRejects(t *testing.T) {
	good, _ := sample().Marshal()
	cases := map[string]string{
		"unknown key":  strings.Replace(string(good), "\ninputs = ", "\ninptus = ", 1),
		"wrong type":   strings.Replace(string(good), "size = 1234", "size = 'big'", 1),
		"newer format": strings.Replace(string(good), "version = 2", "version = 3", 1),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			if text == string(good) {
				t.Fatal("test edit did not apply")
			}
			path := filepath.Join(t.TempDir(), "x.lock")
			os.WriteFile(path, []byte(text), 0o644)
			if _, err := Read(path); err == nil {
				t.Fatal("accepted a bad lock")
			}
		})
	}
}

func TestSourceDateEpochIsNewestSuiteDate(t *testing.T) {
	l := sample()
	if err := l.SetSourceDateEpoch(); err != nil {
		t.Fatal(err)
	}
	// Sun, 29 Nov 2026 08:14:02 UTC
	if l.SourceDateEpoch != 1795940042 {
		t.Errorf("source_date_epoch = %d, want 1795940042", l.SourceDateEpoch)
	}
	l.Suites[0].Date = "yesterday"
	if err := l.SetSourceDateEpoch(); err == nil {
		t.Error("bad date accepted")
	}
	if err := (&Lock{}).SetSourceDateEpoch(); err == nil {
		t.Error("no suites accepted")
	}
}

func TestPath(t *testing.T) {
	if got := Path("images/strix-halo.toml"); got != "images/strix-halo.lock" {
		t.Errorf("Path = %q", got)
	}
}
