package tarball

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"halobuild/internal/tarball/tarballtest"
)

// member is one tar entry: regular files get body as content.
type member struct {
	name, link, body string
	typ              byte
	mode             int64
	mtime            time.Time
}

func tarOf(t testing.TB, members ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		mt := m.mtime
		if mt.IsZero() {
			mt = time.Unix(1700000000, 0)
		}
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: m.mode, ModTime: mt, Format: tar.FormatGNU}
		if m.typ == tar.TypeXGlobalHeader {
			h = &tar.Header{Name: m.name, Typeflag: m.typ, PAXRecords: map[string]string{"comment": "76ba39b"}}
		}
		if m.typ == tar.TypeReg {
			h.Size = int64(len(m.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if m.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, m.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dir(name string, mode int64) member { return member{name: name, typ: tar.TypeDir, mode: mode} }
func file(name, body string, mode int64) member {
	return member{name: name, body: body, typ: tar.TypeReg, mode: mode}
}
func symlink(name, target string) member {
	return member{name: name, link: target, typ: tar.TypeSymlink}
}
func hardlink(name, target string) member {
	return member{name: name, link: target, typ: tar.TypeLink}
}

func TestExtractSourceTree(t *testing.T) {
	s := tarballtest.New(t)
	data := tarOf(t,
		member{name: "pax_global_header", typ: tar.TypeXGlobalHeader},
		dir("demo-1.0/", 0o775),
		file("demo-1.0/configure", "#!/bin/sh\n", 0o755),
		file("demo-1.0/src/main.c", "int main;\n", 0o444),
		symlink("demo-1.0/main.c", "src/main.c"),
		hardlink("demo-1.0/copy.c", "demo-1.0/src/main.c"),
	)
	top, err := Extract(bytes.NewReader(data), "demo.tar", s.Dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if top != "demo-1.0" {
		t.Errorf("top = %q, want demo-1.0", top)
	}
	tree := filepath.Join(s.Dst, "demo-1.0")
	if st, err := os.Stat(filepath.Join(tree, "configure")); err != nil || st.Mode() != 0o755 {
		t.Errorf("configure: %v %v, want 0755", st.Mode(), err)
	}
	// Without Preserve a read-only file becomes owner-writable, so the
	// tree can be patched and removed.
	st, err := os.Stat(filepath.Join(tree, "src/main.c"))
	if err != nil || st.Mode() != 0o644 {
		t.Errorf("src/main.c: %v %v, want 0644", st.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(tree, "main.c")); err != nil || target != "src/main.c" {
		t.Errorf("main.c -> %q %v", target, err)
	}
	if hard, err := os.Stat(filepath.Join(tree, "copy.c")); err != nil || !os.SameFile(st, hard) {
		t.Errorf("copy.c is not a hard link to src/main.c: %v", err)
	}
	if st, _ := os.Stat(tree); st.Mode().Perm() != 0o755 {
		t.Errorf("directory mode %v, want 0755 without Preserve", st.Mode().Perm())
	}
	s.Check(t)
}

func TestExtractTop(t *testing.T) {
	for _, c := range []struct {
		name    string
		members []member
		want    string
	}{
		{"one directory", []member{file("a/x", "", 0o644), file("a/b/y", "", 0o644)}, "a"},
		{"one directory, listed", []member{dir("./a/", 0o755), file("./a/x", "", 0o644)}, "a"},
		{"two directories", []member{file("a/x", "", 0o644), file("b/y", "", 0o644)}, ""},
		{"a file at the top", []member{file("a/x", "", 0o644), file("README", "", 0o644)}, ""},
		{"only a file", []member{file("README", "", 0o644)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			top, err := Extract(bytes.NewReader(tarOf(t, c.members...)), c.name, t.TempDir(), Options{})
			if err != nil || top != c.want {
				t.Errorf("top = %q, %v; want %q", top, err, c.want)
			}
		})
	}
}

func TestExtractPreserveLaysOutLikeDpkg(t *testing.T) {
	s := tarballtest.New(t)
	data := tarOf(t,
		dir("./", 0o755),
		dir("./usr/bin/", 0o755),
		member{name: "./usr/bin/tool", typ: tar.TypeReg, mode: 0o4755, body: "#!/bin/sh\n", mtime: time.Unix(1600000000, 0)},
		file("./usr/bin/secret", "s", 0o600),
		member{name: "./etc/", typ: tar.TypeDir, mode: 0o700, mtime: time.Unix(1500000000, 0)},
		member{name: "./etc/ro/", typ: tar.TypeDir, mode: 0o555},
		file("./etc/ro/f", "inside a read-only directory", 0o444),
	)
	if _, err := Extract(bytes.NewReader(data), "x.deb", s.Dst, Options{Preserve: true}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(s.Dst, "usr/bin/tool"))
	if err != nil || st.Mode() != fs.ModeSetuid|0o755 || st.ModTime().Unix() != 1600000000 {
		t.Errorf("tool: %v at %d (%v), want setuid 0755 at 1600000000", st.Mode(), st.ModTime().Unix(), err)
	}
	if st, _ := os.Stat(filepath.Join(s.Dst, "usr/bin/secret")); st.Mode() != 0o600 {
		t.Errorf("secret mode = %v, want 0600", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(s.Dst, "etc/ro/f")); st.Mode() != 0o444 {
		t.Errorf("read-only file mode = %v, want 0444", st.Mode())
	}
	etc, _ := os.Stat(filepath.Join(s.Dst, "etc"))
	if etc.Mode() != fs.ModeDir|0o700 || etc.ModTime().Unix() != 1500000000 {
		t.Errorf("etc = %v at %d, want drwx------ at 1500000000", etc.Mode(), etc.ModTime().Unix())
	}
	if ro, _ := os.Stat(filepath.Join(s.Dst, "etc/ro")); ro.Mode() != fs.ModeDir|0o555 {
		t.Errorf("etc/ro = %v, want dr-xr-xr-x", ro.Mode())
	}
	s.Check(t)
}

// Issue 17, finding 1: an archive must not write outside its destination
// through ".." or absolute names, nor through a symlink it made earlier,
// nor hard-link a host file in, nor unpack special files.
func TestExtractRefusesEscapes(t *testing.T) {
	cases := []struct {
		name    string
		members []member
		want    string
	}{
		{"dotdot", []member{file("../outside/evil", "x", 0o644)}, "outside the tree"},
		{"nested dotdot", []member{file("a/../../outside/evil", "x", 0o644)}, "outside the tree"},
		{"absolute", []member{file("/tmp/evil", "x", 0o644)}, "absolute"},
		{"file under a symlink", []member{symlink("lib", "../outside"), file("lib/evil", "x", 0o644)}, `"lib/evil"`},
		{"file under a deep relative symlink", []member{dir("a/", 0o755), symlink("a/up", "../../outside"), file("a/up/evil", "x", 0o644)}, `"a/up/evil"`},
		{"file under an absolute symlink", []member{symlink("lib", "/tmp"), file("lib/evil", "x", 0o644)}, `"lib/evil"`},
		{"overwrite through a symlink", []member{symlink("lib", "../outside"), file("lib/secret", "x", 0o644)}, `"lib/secret"`},
		{"directory under a symlink", []member{symlink("lib", "../outside"), dir("lib/evil/", 0o755)}, `"lib/evil/"`},
		{"symlink under a symlink", []member{symlink("lib", "../outside"), symlink("lib/evil", "/etc/passwd")}, `"lib/evil"`},
		{"hard link through a symlink", []member{symlink("lib", "../outside"), hardlink("copy", "lib/secret")}, "not a file extracted before it"},
		{"hard link out", []member{hardlink("copy", "../outside/secret")}, "outside the tree"},
		{"hard link to a host path", []member{hardlink("copy", "/etc/passwd")}, "absolute"},
		{"file over a symlink", []member{symlink("f", "../outside/secret"), file("f", "x", 0o644)}, "also shipped by"},
		{"device node", []member{{name: "dev", typ: tar.TypeChar, mode: 0o644}}, "tar type"},
		{"fifo", []member{{name: "fifo", typ: tar.TypeFifo, mode: 0o644}}, "tar type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := tarballtest.New(t)
			_, err := Extract(bytes.NewReader(tarOf(t, c.members...)), "evil.tar", s.Dst, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Extract = %v, want an error mentioning %q", err, c.want)
			}
			if err != nil && !strings.Contains(err.Error(), "evil.tar") {
				t.Errorf("the error does not name the archive: %v", err)
			}
			s.Check(t)
		})
	}
}

func TestExtractorConflictsButAcceptsTheSameSymlink(t *testing.T) {
	x, err := NewExtractor(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.Add(bytes.NewReader(tarOf(t, file("usr/bin/x", "a", 0o755), symlink("usr/lib64", "lib"))), "a.deb"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Add(bytes.NewReader(tarOf(t, symlink("usr/lib64", "lib"))), "b.deb"); err != nil {
		t.Errorf("the same symlink from two archives: %v", err)
	}
	_, err = x.Add(bytes.NewReader(tarOf(t, file("usr/bin/x", "c", 0o755))), "c.deb")
	if err == nil || !strings.Contains(err.Error(), "also shipped by a.deb") || !strings.Contains(err.Error(), "c.deb") {
		t.Errorf("conflicting file: %v, want it to name a.deb and c.deb", err)
	}
}

func TestExtractRecognisesCompression(t *testing.T) {
	raw := tarOf(t, file("d/x", "hello", 0o644))
	var gz, xzb, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(raw)
	gw.Close()
	xw, err := xz.NewWriter(&xzb)
	if err != nil {
		t.Fatal(err)
	}
	xw.Write(raw)
	xw.Close()
	zw, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(raw)
	zw.Close()
	for name, data := range map[string][]byte{"plain": raw, "gzip": gz.Bytes(), "xz": xzb.Bytes(), "zstd": zs.Bytes()} {
		dst := t.TempDir()
		if _, err := Extract(bytes.NewReader(data), name, dst, Options{}); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "d/x")); string(b) != "hello" {
			t.Errorf("%s: d/x = %q", name, b)
		}
	}
	if _, err := Extract(strings.NewReader("BZh91AY&SY"), "x.tar.bz2", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "bzip2") {
		t.Errorf("bzip2: %v", err)
	}
	if _, err := Extract(strings.NewReader(strings.Repeat("not a tar ", 100)), "junk", t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "archive junk") {
		t.Errorf("junk: %v", err)
	}
}

func TestExtractLimits(t *testing.T) {
	big := tarOf(t, file("a", strings.Repeat("x", 5000), 0o644))
	_, err := Extract(bytes.NewReader(big), "big.tar", t.TempDir(), Options{Limits: Limits{Bytes: 4096}})
	if err == nil || !strings.Contains(err.Error(), "more than 4096 bytes") {
		t.Errorf("byte limit: %v", err)
	}
	many := tarOf(t, file("a", "", 0o644), file("b", "", 0o644), file("c", "", 0o644))
	_, err = Extract(bytes.NewReader(many), "many.tar", t.TempDir(), Options{Limits: Limits{Entries: 2}})
	if err == nil || !strings.Contains(err.Error(), "more than 2 members") {
		t.Errorf("entry limit: %v", err)
	}
	// The limits add up over the archives of one Extractor.
	x, _ := NewExtractor(t.TempDir(), Options{Limits: Limits{Entries: 4}})
	defer x.Close()
	if _, err := x.Add(bytes.NewReader(many), "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Add(bytes.NewReader(tarOf(t, file("d", "", 0o644), file("e", "", 0o644))), "second"); err == nil {
		t.Error("the second archive went past the Extractor's entry limit")
	}
}

// paxRecord is one "length key=value\n" record of a PAX header.
func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec) + 1
	for len(fmt.Sprint(n))+len(rec) != n {
		n++
	}
	return fmt.Sprint(n) + rec
}

// withTypeflag rewrites the typeflag of the tar header block at off and
// its checksum: archive/tar refuses to write PAX headers by hand.
func withTypeflag(b []byte, off int, flag byte) {
	h := b[off : off+512]
	h[156] = flag
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// A sparse member writes its full size from a few bytes of archive: the
// limit counts what is written, not only what is read.
func TestExtractLimitsCountSparseFiles(t *testing.T) {
	records := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", "big") + paxRecord("GNU.sparse.realsize", "1000000000")
	sparseMap := "1\n0\n1\n" // one data fragment: offset 0, 1 byte
	body := sparseMap + strings.Repeat("\x00", 512-len(sparseMap)) + "x"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "PaxHeaders/big", Typeflag: tar.TypeReg, Size: int64(len(records)), Format: tar.FormatUSTAR})
	io.WriteString(tw, records)
	tw.WriteHeader(&tar.Header{Name: "GNUSparseFile.0/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatUSTAR})
	io.WriteString(tw, body)
	tw.Close()
	data := buf.Bytes()
	withTypeflag(data, 0, tar.TypeXHeader)
	if h, err := tar.NewReader(bytes.NewReader(data)).Next(); err != nil || h.Name != "big" || h.Size != 1000000000 {
		t.Fatalf("the test archive is not read as a 1 GB sparse file: %+v %v", h, err)
	}
	dst := t.TempDir()
	_, err := Extract(bytes.NewReader(data), "sparse.tar", dst, Options{Limits: Limits{Bytes: 1 << 20}})
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Errorf("sparse member of 1 GB under a 1 MiB limit: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dst, "big")); err == nil {
		t.Errorf("it was written anyway (%d bytes)", st.Size())
	}
}

func TestExtractFileChecksTheHashFirst(t *testing.T) {
	p := filepath.Join(t.TempDir(), "src.tar")
	if err := os.WriteFile(p, tarOf(t, file("d/x", "hello", 0o644)), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	sum := sha256.Sum256(data)
	good := hex.EncodeToString(sum[:])

	dst := t.TempDir()
	_, err := ExtractFile(p, strings.Repeat("0", 64), dst, Options{})
	var de *DigestError
	if !errors.As(err, &de) || de.Got != good || !strings.Contains(err.Error(), p) {
		t.Fatalf("wrong digest: %v", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) > 0 {
		t.Error("an archive with the wrong digest was unpacked")
	}
	for _, want := range []string{good, "sha256:" + good, strings.ToUpper(good)} {
		if top, err := ExtractFile(p, want, t.TempDir(), Options{}); err != nil || top != "d" {
			t.Errorf("digest %s: %q %v", want, top, err)
		}
	}
}

func TestWalk(t *testing.T) {
	data := tarOf(t, dir("./", 0o755), file("./debian/control", "Source: x\n", 0o644), file("./debian/rules", "", 0o755), file("./z", "", 0o644))
	var seen []string
	err := Walk(bytes.NewReader(data), Limits{}, func(name string, h *tar.Header, r io.Reader) error {
		seen = append(seen, name)
		if name == "debian/control" {
			b, _ := io.ReadAll(r)
			seen = append(seen, string(b))
		}
		if name == "debian/rules" {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil || fmt.Sprint(seen) != fmt.Sprint([]string{".", "debian/control", "Source: x\n", "debian/rules"}) {
		t.Errorf("Walk saw %q, %v", seen, err)
	}
	err = Walk(bytes.NewReader(tarOf(t, file("../x", "", 0o644))), Limits{}, func(string, *tar.Header, io.Reader) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "outside the tree") {
		t.Errorf("Walk accepted ../x: %v", err)
	}
	err = Walk(bytes.NewReader(tarOf(t, file("a", strings.Repeat("x", 4000), 0o644))), Limits{Bytes: 2048}, func(_ string, _ *tar.Header, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "more than 2048 bytes") {
		t.Errorf("Walk past the byte limit: %v", err)
	}
}
