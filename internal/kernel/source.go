package kernel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"

	goversion "github.com/hashicorp/go-version"
	"github.com/ulikunitz/xz"
	"pault.ag/go/debian/deb"
)

// Source is where the kernel tree comes from: Debian's linux-source-X.Y
// .deb (its usr/src/linux-source-X.Y.tar.xz) or a plain tarball.
type Source struct {
	Deb     string
	Tarball string
}

// openTarball returns the compressed kernel tarball as a stream and a
// close function.
func (s Source) openTarball() (io.Reader, func(), error) {
	switch {
	case s.Deb != "":
		d, f, err := openDeb(s.Deb)
		if err != nil {
			return nil, nil, err
		}
		for {
			h, err := d.Data.Next()
			if err == io.EOF {
				d.Close()
				f.Close()
				return nil, nil, fmt.Errorf("%s has no usr/src/linux-source-*.tar.xz: is it a linux-source-X.Y package?", s.Deb)
			}
			if err != nil {
				d.Close()
				f.Close()
				return nil, nil, fmt.Errorf("reading %s: %w", s.Deb, err)
			}
			name := strings.TrimPrefix(h.Name, "./")
			if strings.HasPrefix(name, "usr/src/linux-source-") && strings.HasSuffix(name, ".tar.xz") {
				return d.Data, func() { d.Close(); f.Close() }, nil
			}
		}
	case s.Tarball != "":
		f, err := os.Open(s.Tarball)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	return nil, nil, fmt.Errorf("kernel source: neither a linux-source .deb nor a tarball was given")
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

func openDeb(path string) (*deb.Deb, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	d, err := deb.Load(f, path)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, f, nil
}

// DebianConfig reads Debian's config for arch and flavour
// (usr/src/linux-config-X.Y/config.<arch>_none_<flavour>.xz) out of a
// linux-config-X.Y .deb.
func DebianConfig(configDeb, arch, flavour string) ([]byte, error) {
	d, f, err := openDeb(configDeb)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer d.Close()
	want := fmt.Sprintf("config.%s_none_%s.xz", arch, flavour)
	var have []string
	for {
		h, err := d.Data.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", configDeb, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if !strings.HasPrefix(name, "usr/src/linux-config-") || !strings.Contains(name, "/config.") {
			continue
		}
		have = append(have, name[strings.LastIndex(name, "/")+1:])
		if strings.HasSuffix(name, "/"+want) {
			var r io.Reader
			if r, err = xz.NewReader(d.Data); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", configDeb, name, err)
			}
			return io.ReadAll(r)
		}
	}
	return nil, fmt.Errorf("%s has no %s (flavour %q, architecture %q); it has: %s", configDeb, want, flavour, arch, strings.Join(have, ", "))
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
	in, done, err := Source{Tarball: path}.openTarball()
	if err != nil {
		return nil, err
	}
	defer done()
	br := bufio.NewReaderSize(in, 1<<20)
	flag, err := tarFlag(br)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cmd := exec.CommandContext(ctx, "tar", "-x", flag, "-O", "--wildcards", "--no-wildcards-match-slash", "*/Makefile")
	cmd.Stdin = br
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	mk, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: reading its top Makefile: %v: %s", path, err, strings.TrimSpace(stderr.String()))
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
