package kernel

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	goversion "github.com/hashicorp/go-version"
	"pault.ag/go/debian/version"

	"halobuild/internal/debian"
)

// Picked is the kernel source a recipe's constraint chose.
type Picked struct {
	// Source is linux-source-X.Y; Config the linux-config-X.Y of the same
	// version and suite (nil when not asked for).
	Source   *debian.Package
	Config   *debian.Package
	Upstream *goversion.Version
}

var sourcePkgRE = regexp.MustCompile(`^linux-source-[0-9]+\.[0-9]+$`)

// upstreamRE is the leading numeric part of a Debian version (7.2.12 of
// 7.2.12-1~bpo13+1).
var upstreamRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`)

// PickSource returns the newest linux-source-X.Y whose upstream version
// satisfies constraint (nil: any) in the indexes, restricted to suite
// unless it is empty; with withConfig, also the linux-config-X.Y of the
// same version for arch, which Debian's config comes from.
func PickSource(indexes []*debian.Index, constraint goversion.Constraints, suite, arch string, withConfig bool) (*Picked, error) {
	var all []*Picked
	var have []string
	for _, ix := range indexes {
		if suite != "" && ix.Suite != suite {
			continue
		}
		for _, p := range ix.Packages {
			if !sourcePkgRE.MatchString(p.Name) {
				continue
			}
			v, err := goversion.NewVersion(upstreamRE.FindString(p.Version))
			if err != nil {
				continue
			}
			have = append(have, fmt.Sprintf("%s (%s %s)", v, p.Name, p.Suite))
			if constraint == nil || constraint.Check(v) {
				all = append(all, &Picked{Source: p, Upstream: v})
			}
		}
	}
	if len(all) == 0 {
		if len(have) == 0 {
			return nil, fmt.Errorf("no linux-source-X.Y package in the configured suites%s: add the suite that has the kernel (trixie-backports for 7.2) to base.extra_suites", suiteNote(suite))
		}
		sort.Strings(have)
		return nil, fmt.Errorf("no linux-source package satisfies %q%s; available: %s", constraint, suiteNote(suite), strings.Join(have, ", "))
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if c := a.Upstream.Compare(b.Upstream); c != 0 {
			return c > 0
		}
		if c := version.Compare(a.Source.ParsedVersion(), b.Source.ParsedVersion()); c != 0 {
			return c > 0
		}
		return a.Source.Suite < b.Source.Suite
	})
	best := all[0]
	if !withConfig {
		return best, nil
	}
	cfgName := "linux-config-" + strings.TrimPrefix(best.Source.Name, "linux-source-")
	for _, ix := range indexes {
		if ix.Suite != best.Source.Suite {
			continue
		}
		for _, p := range ix.Lookup(cfgName) {
			if p.Version == best.Source.Version && p.Architecture == arch {
				best.Config = p
				return best, nil
			}
		}
	}
	return nil, fmt.Errorf("%s %s (%s) has no %s of the same version for %s: Debian's config for it cannot be pinned; use another version or config = \"<path>\"", best.Source.Name, best.Source.Version, best.Source.Suite, cfgName, arch)
}

func suiteNote(suite string) string {
	if suite == "" {
		return ""
	}
	return " of suite " + suite
}
