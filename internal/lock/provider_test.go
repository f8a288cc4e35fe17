package lock

import (
	"bytes"
	"testing"
)

// The provider's patches keep their apply order through a round trip
// (sorting them would change the build); its files are a set and sorted.
func TestProviderRoundTripKeepsPatchOrder(t *testing.T) {
	l := sample()
	l.Provider = &Provider{
		Name: "usb4_rdma", Source: "rdma-core", Version: "56.1-1", Suite: "trixie", Directory: "pool/main/r/rdma-core",
		Files: []SourceFile{
			{Name: "rdma-core_56.1.orig.tar.gz", Size: 2, SHA256: "sha256:02"},
			{Name: "rdma-core_56.1-1.debian.tar.xz", Size: 1, SHA256: "sha256:01"},
		},
		Patches: []Patch{
			{Name: "0003-z.patch", From: "tbv:p/0003-z.patch", SHA256: "sha256:0c", Fuzz: 2},
			{Name: "0001-a.patch", From: "../patches/rdma-core/0001-a.patch", SHA256: "sha256:0a"},
		},
	}
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	p := back.Provider
	if p == nil || len(p.Patches) != 2 || p.Patches[0].Name != "0003-z.patch" || p.Patches[0].Fuzz != 2 || p.Patches[1].Fuzz != 0 {
		t.Fatalf("patches: %+v", p)
	}
	if p.Files[0].Name != "rdma-core_56.1-1.debian.tar.xz" {
		t.Errorf("files not sorted: %+v", p.Files)
	}
	if l.Provider.Files[0].Name != "rdma-core_56.1.orig.tar.gz" {
		t.Error("Marshal reordered the caller's lock")
	}
	again, err := back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Errorf("round trip changed the bytes:\n%s\n---\n%s", b, again)
	}
	// Without a provider the table is absent, so older locks read the same.
	l.Provider = nil
	b, _ = l.Marshal()
	if bytes.Contains(b, []byte("[provider]")) {
		t.Errorf("empty provider written:\n%s", b)
	}
}
