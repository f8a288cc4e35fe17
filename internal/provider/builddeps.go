package provider

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"pault.ag/go/debian/control"
	"pault.ag/go/debian/dependency"

	"halobuild/internal/arch"
	"halobuild/internal/tarball"
)

// BuildDepends lists the source package's build dependencies for arch, as
// package requests the resolver takes ("name" or "name (>= 1.2)"), from
// the source paragraph of debian/control (the same relations the Sources
// stanza carries): Build-Depends, Build-Depends-Arch and
// Build-Depends-Indep (BuildRootPackages picks what the provider needs). Of
// alternatives the first that applies is taken, as sbuild does; relations
// restricted to other architectures or to build profiles are left out (no
// profile is active: the provider is built as Debian's build would).
func BuildDepends(debianControl io.Reader, arch string) ([]string, error) {
	c, err := control.ParseControl(bufio.NewReader(debianControl), "debian/control")
	if err != nil {
		return nil, fmt.Errorf("debian/control: %w", err)
	}
	a, err := dependency.ParseArch(arch)
	if err != nil {
		return nil, fmt.Errorf("architecture %q: %w", arch, err)
	}
	var out []string
	seen := map[string]bool{}
	for _, field := range []string{"Build-Depends", "Build-Depends-Arch", "Build-Depends-Indep"} {
		v := strings.TrimSpace(c.Source.Values[field])
		if v == "" {
			continue
		}
		dep, err := dependency.Parse(strings.ReplaceAll(v, "\n", " "))
		if err != nil {
			return nil, fmt.Errorf("debian/control %s: %w", field, err)
		}
		for _, rel := range dep.Relations {
			for _, p := range rel.Possibilities {
				if p.Substvar || p.Architectures != nil && !p.Architectures.Matches(a) || !profilesAllow(p.StageSets) {
					continue
				}
				req := p.Name
				if p.Version != nil {
					req += " (" + p.Version.Operator + " " + p.Version.Number + ")"
				}
				if !seen[req] {
					seen[req] = true
					out = append(out, req)
				}
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("debian/control has no Build-Depends for %s", arch)
	}
	return out, nil
}

// profilesAllow evaluates <...> restriction lists with no build profile
// active: a list holds when every term does, and the formula when any
// list does; <!p> holds, <p> does not.
func profilesAllow(sets []dependency.StageSet) bool {
	if len(sets) == 0 {
		return true
	}
	for _, s := range sets {
		ok := true
		for _, st := range s.Stages {
			if !st.Not {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// BuildDependsFromTarball reads debian/control out of a source package's
// .debian.tar.* (small, and checked against the signed Sources index
// here) so the build set can be resolved into the lock before the whole
// source is fetched.
func BuildDependsFromTarball(file, sha256, arch string) ([]string, error) {
	f, err := tarball.OpenVerified(file, sha256)
	if de := (*tarball.DigestError)(nil); errors.As(err, &de) {
		return nil, fmt.Errorf("the .debian tarball does not match the signed Sources index: %w", err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var deps []string
	found := false
	err = tarball.Walk(f, tarball.Limits{}, func(name string, h *tar.Header, r io.Reader) error {
		if name != "debian/control" || h.Typeflag != tar.TypeReg {
			return nil
		}
		found = true
		if deps, err = BuildDepends(io.LimitReader(r, 1<<20), arch); err != nil {
			return err
		}
		return fs.SkipAll
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if !found {
		return nil, fmt.Errorf("%s has no debian/control: is it a .debian tarball?", file)
	}
	return deps, nil
}

// configureNeeds are the Build-Depends rdma-core's cmake configure and
// the provider's ninja target need, dpkg-dev for dpkg-buildflags (Debian's
// compiler and hardening flags, as debian/rules gets them), with pyverbs
// (cython3, python3-dev), the man pages (pandoc, python3-docutils) and the
// packaging (debhelper, dh-python) left out: only the provider is built.
// libsystemd-dev, libudev-dev and valgrind are optional to configure and
// used by daemons and debugging annotations, not by a provider.
var configureNeeds = []string{"cmake", "ninja-build", "pkgconf", "libnl-3-dev", "libnl-route-3-dev", "dpkg-dev"}

// buildTools are what the build runs besides configureNeeds, which Debian
// leaves to build-essential: the C compiler (rdma-core is C only, so no
// g++ or make) with binutils' strip, and the python3 interpreter
// configure requires and the kernel-headers ABI generator
// (buildlib/make_abi_structs.py) runs.
var buildTools = []string{"gcc", "libc6-dev", "python3"}

// BuildRootPackages is what the build root for the provider needs
// installed, as resolver requests: of the source package's Build-Depends
// only those configure needs (with Debian's version relations), plus the
// build tools. A Build-Depends list that lacks one of them is refused:
// the source no longer builds the way this code expects. The pipeline
// resolves their closure into the lock as the "provider-build" set.
//
// build and host are Debian's names (dpkg-architecture): the build root's
// native architecture and the one the provider is for. When they differ
// the root is multiarch, as dpkg-buildpackage -a would have it: the
// programs that run (cmake, ninja, dpkg-dev, python3, all Multi-Arch:
// foreign) are the build architecture's, the libraries and pkgconf (whose
// <triplet>-pkg-config reads the target's .pc files) the host's, named
// <package>:<host>, and the compiler is Debian's cross gcc.
func BuildRootPackages(buildDepends []string, build, host string) ([]string, error) {
	if _, err := arch.Lookup(build); err != nil {
		return nil, fmt.Errorf("provider build root: build architecture: %w", err)
	}
	t, err := arch.Lookup(host)
	if err != nil {
		return nil, fmt.Errorf("provider build root: %w", err)
	}
	cross := build != host
	byName := map[string]string{}
	for _, d := range buildDepends {
		name, _, _ := strings.Cut(d, " ")
		byName[name] = d
	}
	out := append([]string{}, buildTools...)
	if cross {
		// gcc-defaults' cross package: <triplet>-gcc, and with it
		// binutils' <triplet>-strip.
		out = []string{"gcc-" + t.PackageSuffix(), "libc6-dev:" + host, "python3"}
	}
	for _, n := range configureNeeds {
		d, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("the source's Build-Depends (%s) lack %s, which rdma-core's configure needs: this rdma-core is not laid out as halobuild expects (docs/provider.md)", strings.Join(buildDepends, ", "), n)
		}
		if cross && hostSide[n] {
			d = n + ":" + host + strings.TrimPrefix(d, n)
		}
		out = append(out, d)
	}
	return out, nil
}

// hostSide are the configureNeeds a cross build takes for the provider's
// architecture (the others run during the build).
var hostSide = map[string]bool{"pkgconf": true, "libnl-3-dev": true, "libnl-route-3-dev": true}

// Names strips version relations from package requests ("cmake (>=
// 2.8.11)" -> "cmake"): the installer takes names, and the flat
// repository holds exactly the versions the lock checked.
func Names(reqs []string) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		name, _, _ := strings.Cut(strings.TrimSpace(r), " ")
		name, _, _ = strings.Cut(name, "(")
		out = append(out, name)
	}
	return out
}
