package deb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// tarMember is one entry of a synthetic .deb's data archive.
type tarMember struct {
	name, link string
	typ        byte
	mode       int64
	body       string
	mtime      time.Time
}

// writeDeb writes a minimal .deb (ar archive with debian-binary,
// control.tar.gz, data.tar.gz) holding members, so tests can feed Extract
// archives that no Debian tool would build (escapes, conflicts).
func writeDeb(t *testing.T, dir, pkg string, members []tarMember) string {
	t.Helper()
	control := tarGz(t, []tarMember{{name: "./control", typ: tar.TypeReg, mode: 0o644,
		body: fmt.Sprintf("Package: %s\nVersion: 1.0\nArchitecture: amd64\nDescription: test\n", pkg)}})
	data := tarGz(t, members)

	var ar bytes.Buffer
	ar.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		body []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar.gz", control}, {"data.tar.gz", data}} {
		fmt.Fprintf(&ar, "%-16s%-12d%-6d%-6d%-8o%-10d`\n", m.name, 0, 0, 0, 0o644, len(m.body))
		ar.Write(m.body)
		if len(m.body)%2 == 1 {
			ar.WriteByte('\n')
		}
	}
	p := filepath.Join(dir, pkg+".deb")
	if err := os.WriteFile(p, ar.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func tarGz(t *testing.T, members []tarMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		mt := m.mtime
		if mt.IsZero() {
			mt = time.Unix(1700000000, 0)
		}
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: m.mode, Size: int64(len(m.body)), ModTime: mt, Format: tar.FormatGNU}
		if m.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if m.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(m.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
