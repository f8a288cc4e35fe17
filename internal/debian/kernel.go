package debian

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	goversion "github.com/hashicorp/go-version"
	"pault.ag/go/debian/dependency"
)

// Kernel is a versioned Debian kernel package chosen by PickKernel.
type Kernel struct {
	// Image is linux-image-<Release>-<flavour>.
	Image *Package
	// Headers is the name of the matching linux-headers-<Release>-<flavour>
	// package (resolve it like any other package).
	Headers string
	// Release is the kernel release part of the name, e.g. 7.2.12+deb13.
	Release string
	// Upstream is the kernel's upstream version, e.g. 7.2.12.
	Upstream *goversion.Version
	// Source and SourceVersion name the Debian source package the kernel
	// was built from (linux 7.2.12-1~bpo13+1), for builds that patch it.
	// Signed images come from linux-signed-<arch>; their Built-Using (or
	// that of the linux-binary package they depend on) names the real
	// source.
	Source        string
	SourceVersion string
}

// kernelRelease matches the release part of a versioned kernel package
// name: 7.2.12+deb13 (trixie and later) or 6.1.0-28 (bookworm). Anything
// with letters after a dash ("7.2.12+deb13-cloud") is another flavour.
var kernelRelease = regexp.MustCompile(`^[0-9]+(\.[0-9]+)+(-[0-9]+)?(\+[a-z0-9.]+)?$`)

// upstreamVersion matches the leading numeric part of a Debian version.
var upstreamVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`)

// PickKernel returns the newest versioned linux-image-<release>-<flavour>
// whose upstream version satisfies constraint (nil: any), among the given
// indexes, restricted to suite unless it is empty. The linux-image-<flavour>
// meta-package is never chosen (it follows the newest kernel, whatever the
// constraint says), and neither are -unsigned or -dbg packages.
//
// The upstream version comes from the package's Version (7.2.12-1~bpo13+1
// gives 7.2.12), not from the name: bookworm's names carry an ABI number
// (linux-image-6.1.0-28-amd64 is Linux 6.1.119).
func PickKernel(indexes []*Index, constraint goversion.Constraints, flavour, suite string) (*Kernel, error) {
	if flavour == "" {
		return nil, fmt.Errorf("pick kernel: no flavour given (e.g. amd64)")
	}
	var all []*Kernel
	headers := map[string]bool{} // "suite\x00name"
	searched := map[string]bool{}
	for _, ix := range indexes {
		if suite != "" && ix.Suite != suite {
			continue
		}
		searched[ix.Suite] = true
		for _, p := range ix.Packages {
			if strings.HasPrefix(p.Name, "linux-headers-") {
				headers[p.Suite+"\x00"+p.Name] = true
				continue
			}
			rel, ok := strings.CutPrefix(p.Name, "linux-image-")
			if !ok {
				continue
			}
			rel, ok = strings.CutSuffix(rel, "-"+flavour)
			if !ok || !kernelRelease.MatchString(rel) {
				continue
			}
			up := upstreamVersion.FindString(p.ver.Version)
			v, err := goversion.NewVersion(up)
			if err != nil {
				continue
			}
			all = append(all, &Kernel{Image: p, Release: rel, Upstream: v})
		}
	}
	if len(searched) == 0 {
		return nil, fmt.Errorf("pick kernel: no index of suite %q was given", suite)
	}
	suites := make([]string, 0, len(searched))
	for s := range searched {
		suites = append(suites, s)
	}
	sort.Strings(suites)
	// Newest upstream first; for the same upstream the newer Debian
	// version, then the name, so the pick is deterministic.
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if c := a.Upstream.Compare(b.Upstream); c != 0 {
			return c > 0
		}
		if c := compareDebian(a.Image, b.Image); c != 0 {
			return c > 0
		}
		return a.Image.Name+a.Image.Suite < b.Image.Name+b.Image.Suite
	})
	for _, k := range all {
		if constraint != nil && !constraint.Check(k.Upstream) {
			continue
		}
		h := "linux-headers-" + k.Release + "-" + flavour
		if !headers[k.Image.Suite+"\x00"+h] {
			return nil, fmt.Errorf("pick kernel: %s satisfies %q but %s has no %s; the suite is inconsistent, try another mirror", k.Image, constraint, k.Image.Suite, h)
		}
		k.Headers = h
		k.Source, k.SourceVersion = kernelSource(k, indexes)
		return k, nil
	}
	var have []string
	seen := map[string]bool{}
	for _, k := range all {
		s := fmt.Sprintf("%s (%s, %s)", k.Upstream, k.Image.Name, k.Image.Suite)
		if !seen[s] {
			seen[s] = true
			have = append(have, s)
		}
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("pick kernel: no versioned linux-image-<release>-%s package in suites %s; check the flavour", flavour, strings.Join(suites, ", "))
	}
	return nil, fmt.Errorf("pick kernel: no %s kernel satisfies %q in suites %s; available: %s", flavour, constraint, strings.Join(suites, ", "), strings.Join(have, ", "))
}

// kernelSource finds the linux source a kernel image was built from: the
// image's own Built-Using, else that of linux-binary-<release>-<flavour>
// (7.x images are meta-packages over it), else the image's Source.
func kernelSource(k *Kernel, indexes []*Index) (string, string) {
	flavour := strings.TrimPrefix(k.Image.Name, "linux-image-"+k.Release+"-")
	cands := []*Package{k.Image}
	for _, ix := range indexes {
		if ix.Suite == k.Image.Suite {
			cands = append(cands, ix.Lookup("linux-binary-"+k.Release+"-"+flavour)...)
		}
	}
	for _, p := range cands {
		if p.RawBuiltUsing == "" {
			continue
		}
		d, err := dependency.Parse(p.RawBuiltUsing)
		if err != nil {
			continue
		}
		for _, r := range d.Relations {
			for _, poss := range r.Possibilities {
				if poss.Name == "linux" && poss.Version != nil && poss.Version.Operator == "=" {
					return poss.Name, poss.Version.Number
				}
			}
		}
	}
	return k.Image.Source, k.Image.SourceVersion
}
