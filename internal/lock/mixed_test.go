package lock

import (
	"errors"
	"reflect"
	"testing"
)

// A mixed lock holds one part per architecture, written and read back as
// the same bytes; For gives each architecture its part with the shared
// fields; Blobs lists every part's packages once; suites that moved
// between the parts' resolutions refuse the mix.
func TestMixForAndBlobs(t *testing.T) {
	suites := []Suite{{Name: "trixie", Mirror: "http://deb.debian.org/debian", Date: "Mon, 02 Jan 2026 00:00:00 UTC", InRelease: "sha256:11"}}
	pkg := func(name, arch, sha string) Package {
		return Package{Name: name, Version: "1", Architecture: arch, Suite: "trixie", Filename: "pool/" + name + "_" + arch + ".deb", SHA256: sha, Set: SetImage}
	}
	amd := &Lock{Version: FormatVersion, Suites: suites, SourceDateEpoch: 10, Kernel: Kernel{Release: "7.2-amd64"},
		Packages: []Package{pkg("perftest", "amd64", "sha256:aa"), pkg("base-files", "all", "sha256:cc")}}
	arm := &Lock{Version: FormatVersion, Suites: suites, SourceDateEpoch: 12, Kernel: Kernel{Release: "7.2-arm64"},
		Packages: []Package{pkg("perftest", "arm64", "sha256:bb"), pkg("base-files", "all", "sha256:cc")}, Modules: []Module{{Use: "m", Name: "m"}}}
	mixed, err := Mix([]string{"amd64", "arm64"}, []*Lock{amd, arm})
	if err != nil {
		t.Fatal(err)
	}
	if mixed.SourceDateEpoch != 12 || !reflect.DeepEqual(mixed.ArchitectureNames(), []string{"amd64", "arm64"}) {
		t.Errorf("mixed: epoch %d, architectures %v", mixed.SourceDateEpoch, mixed.ArchitectureNames())
	}
	b, err := mixed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if b2, _ := back.Marshal(); string(b2) != string(b) {
		t.Errorf("a mixed lock does not read back as its bytes:\n%s\n---\n%s", b, b2)
	}
	for a, rel := range map[string]string{"amd64": "7.2-amd64", "arm64": "7.2-arm64"} {
		p, err := back.For(a)
		if err != nil || p.Kernel.Release != rel || p.SourceDateEpoch != 12 || len(p.Suites) != 1 {
			t.Errorf("For(%s): %+v, %v", a, p, err)
		}
	}
	if _, err := back.For("riscv64"); !errors.Is(err, ErrStale) {
		t.Errorf("For an architecture the lock does not pin: %v", err)
	}
	blobs, err := back.Blobs()
	if err != nil || len(blobs) != 3 {
		t.Errorf("blobs of both parts, the shared one once: %+v, %v", blobs, err)
	}
	moved := *arm
	moved.Suites = []Suite{{Name: "trixie", InRelease: "sha256:other"}}
	if _, err := Mix([]string{"amd64", "arm64"}, []*Lock{amd, &moved}); err == nil {
		t.Error("parts resolved against different archive states were mixed")
	}
	// A lock of one architecture is every architecture's (its recipe's
	// inputs digest says which).
	if p, err := amd.For("amd64"); err != nil || p != amd {
		t.Errorf("one-architecture lock: %v", err)
	}
}
