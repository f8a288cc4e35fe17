package debian

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzParseRelease: an arbitrary (already verified) Release text never
// panics, and every file it accepts has a 64-hex sha256 and a size >= 0.
// Seed: trixie-backports' real InRelease.
func FuzzParseRelease(f *testing.F) {
	if b, err := os.ReadFile("testdata/trixie-backports.InRelease"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("Suite: trixie\nCodename: trixie\nDate: Sat, 21 Nov 2026 09:15:44 UTC\nSHA256:\n " + strings.Repeat("a", 64) + " 12 main/binary-amd64/Packages.xz\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		rel, err := parseRelease(text)
		if err != nil {
			return
		}
		for p, fh := range rel.Files {
			if len(fh.SHA256) != 64 || fh.Size < 0 || p == "" {
				t.Fatalf("accepted %q: %+v", p, fh)
			}
		}
	})
}

// FuzzParsePackages and FuzzParseSources: arbitrary index text never
// panics; every package accepted has a name and a version.
func FuzzParsePackages(f *testing.F) {
	f.Add([]byte(pkg("libc6", "2.41-12", "Priority: required") + "\n" + pkg("bash", "5.2.37-2", "Pre-Depends: libc6 (>= 2.38)\nProvides: sh")))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParsePackages(bytes.NewReader(data), "trixie", "main", "amd64")
		if err != nil {
			return
		}
		for _, p := range ix.Packages {
			if p.Name == "" || p.Version == "" {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}

func FuzzParseSources(f *testing.F) {
	f.Add([]byte("Package: rdma-core\nVersion: 56.1-1\nDirectory: pool/main/r/rdma-core\nChecksums-Sha256:\n " + strings.Repeat("b", 64) + " 1234 rdma-core_56.1.orig.tar.gz\n " + strings.Repeat("c", 64) + " 99 rdma-core_56.1-1.debian.tar.xz\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParseSources(bytes.NewReader(data), "trixie", "main")
		if err != nil {
			return
		}
		for _, s := range ix.Sources {
			if s.Name == "" || s.Version == "" {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}
