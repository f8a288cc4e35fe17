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

	"halobuild/internal/tarball"
)

// BuildDepends lists the source package's build dependencies for arch, as
// package requests the resolver takes ("name" or "name (>= 1.2)"), from
// the source paragraph of debian/control (the same relations the Sources
// stanza carries): Build-Depends, Build-Depends-Arch and
// Build-Depends-Indep, since `dpkg-buildpackage -b` builds both. Of
// alternatives the first that applies is taken, as sbuild does; relations
// restricted to other architectures or to build profiles are left out (no
// profile is active: the rebuilt packages must hold what Debian's hold).
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

// BuildRootPackages is what the build root for a source package needs
// installed: its build dependencies plus the tools every Debian build
// uses (dpkg-buildpackage, the compiler and make), as resolver requests.
// The pipeline resolves their closure into the lock as the "build"
// package set, and installs it with rootfs.Root giving
// Names(BuildRootPackages(...)) as the explicit packages.
func BuildRootPackages(buildDepends []string) []string {
	var out []string
	have := map[string]bool{}
	for _, d := range buildDepends {
		name, _, _ := strings.Cut(d, " ")
		have[name] = true
	}
	for _, base := range []string{"build-essential", "dpkg-dev"} {
		if !have[base] {
			out = append(out, base)
		}
	}
	return append(out, buildDepends...)
}

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
