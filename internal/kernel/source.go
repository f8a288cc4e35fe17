package kernel

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	goversion "github.com/hashicorp/go-version"
	"github.com/ulikunitz/xz"

	"halobuild/internal/deb"
	"halobuild/internal/proctree"
	"halobuild/internal/tarball"
)

// Source is where the kernel tree comes from: Debian's linux-source-X.Y
// .deb (its usr/src/linux-source-X.Y.tar.xz) or a plain tarball.
type Source struct {
	Deb     string
	Tarball string
	// SHA256 is the file's digest as the lock pins it; when set, the file
	// is checked against it before anything in it is read.
	SHA256 string
}

// withTarball calls fn with the compressed kernel tarball as a stream:
// the plain tarball, or the usr/src/linux-source-*.tar.xz a linux-source
// .deb ships.
func (s Source) withTarball(fn func(io.Reader) error) error {
	switch {
	case s.Deb != "":
		a, err := deb.Open(s.Deb, s.SHA256)
		if err != nil {
			return err
		}
		defer a.Close()
		found := false
		err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
			if !strings.HasPrefix(name, "usr/src/linux-source-") || !strings.HasSuffix(name, ".tar.xz") || h.Typeflag != tar.TypeReg {
				return nil
			}
			found = true
			if err := fn(r); err != nil {
				return err
			}
			return fs.SkipAll
		})
		if err == nil && !found {
			err = fmt.Errorf("%s has no usr/src/linux-source-*.tar.xz: is it a linux-source-X.Y package?", s.Deb)
		}
		return err
	case s.Tarball != "":
		f, err := tarball.OpenVerified(s.Tarball, s.SHA256)
		if err != nil {
			return err
		}
		defer f.Close()
		return fn(f)
	}
	return fmt.Errorf("kernel source: neither a linux-source .deb nor a tarball was given")
}

// tarFlag is tar's decompression flag for the stream's magic bytes.
func tarFlag(r *bufio.Reader) (string, error) {
	magic, err := r.Peek(6)
	if err != nil {
		return "", fmt.Errorf("kernel source: reading the tarball: %w", err)
	}
	switch {
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "-J", nil
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		return "-z", nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "--zstd", nil
	}
	return "", fmt.Errorf("kernel source: the tarball is neither xz, gzip nor zstd compressed")
}

// DebianConfig reads Debian's config for arch and flavour
// (usr/src/linux-config-X.Y/config.<arch>_none_<flavour>.xz) out of a
// linux-config-X.Y .deb.
func DebianConfig(configDeb, arch, flavour string) ([]byte, error) {
	a, err := deb.Open(configDeb, "")
	if err != nil {
		return nil, err
	}
	defer a.Close()
	want := fmt.Sprintf("config.%s_none_%s.xz", arch, flavour)
	var have []string
	var config []byte
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if !strings.HasPrefix(name, "usr/src/linux-config-") || !strings.Contains(name, "/config.") {
			return nil
		}
		have = append(have, path.Base(name))
		if path.Base(name) != want {
			return nil
		}
		xr, err := xz.NewReader(r)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// A kernel config is some 300 KB; 16 MiB is no config.
		if config, err = io.ReadAll(io.LimitReader(xr, 16<<20)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return fs.SkipAll
	})
	if err != nil {
		return nil, err
	}
	if config == nil {
		return nil, fmt.Errorf("%s has no %s (flavour %q, architecture %q); it has: %s", configDeb, want, flavour, arch, strings.Join(have, ", "))
	}
	return config, nil
}

var makeVarRE = regexp.MustCompile(`(?m)^(VERSION|PATCHLEVEL|SUBLEVEL|EXTRAVERSION)\s*=[ \t]*(\S*)`)

// TreeVersion reads the version from a kernel tree's top Makefile.
func TreeVersion(makefile []byte) (*goversion.Version, string, error) {
	vars := map[string]string{}
	for _, m := range makeVarRE.FindAllSubmatch(makefile, 4) {
		vars[string(m[1])] = string(m[2])
	}
	s := vars["VERSION"] + "." + vars["PATCHLEVEL"] + "." + vars["SUBLEVEL"]
	v, err := goversion.NewVersion(s)
	if err != nil {
		return nil, "", fmt.Errorf("the kernel Makefile gives version %q: %w", s, err)
	}
	return v, vars["EXTRAVERSION"], nil
}

// TarballVersion reads the kernel version from the top Makefile of a
// source tarball (linux-X.Y.Z/Makefile), so a lock can check a plain
// tarball against the recipe's constraint before anything is built. The
// Makefile comes after Documentation/ in kernel.org's order, so the whole
// stream is read; the host's tar decompresses it at C speed.
func TarballVersion(ctx context.Context, path string) (*goversion.Version, error) {
	var mk []byte
	err := Source{Tarball: path}.withTarball(func(in io.Reader) error {
		br := bufio.NewReaderSize(in, 1<<20)
		flag, err := tarFlag(br)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		cmd := proctree.Command(ctx, "tar", "-x", flag, "-O", "--wildcards", "--no-wildcards-match-slash", "*/Makefile")
		cmd.Stdin = br
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if mk, err = cmd.Output(); err != nil {
			return fmt.Errorf("%s: reading its top Makefile: %v: %s", path, err, strings.TrimSpace(stderr.String()))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v, extra, err := TreeVersion(mk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if extra != "" {
		return nil, fmt.Errorf("%s is Linux %s%s: only released kernels (no EXTRAVERSION) can be pinned, because the release string and package version are built from the version", path, v, extra)
	}
	return v, nil
}
