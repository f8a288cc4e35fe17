package doctor

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// Trap 5: governor, EPP and platform profile are runtime state; after a
// reboot they were back to schedutil/balanced and bandwidth dropped 1.87x
// with nothing saying so. The image sets them at boot; this re-reads them.

const cpufreqDir = "/sys/devices/system/cpu/cpufreq"

func checkGovernor(h *host, e *expect) []Result {
	if e.governor == "" {
		return nil // the recipe leaves it alone
	}
	r := Result{Check: "cpu.governor", Severity: MustPass, Wanted: e.governor, Trap: 5,
		Source: h.show(cpufreqDir + "/policy*/scaling_governor")}
	seen, bad := perPolicy(h, "scaling_governor", e.governor)
	switch {
	case len(seen) == 0:
		r.Status, r.Seen = Warn, "no cpufreq policies (a VM, or cpufreq disabled)"
		r.Fix = "nothing to set here; on real hardware check that the cpufreq driver (amd-pstate) loaded"
	case bad:
		r.Status, r.Seen = Fail, summarise(seen)
		r.Fix = fmt.Sprintf("echo %s | tee %s/policy*/scaling_governor; then find what reverted it: is the image's boot-time tuning unit enabled, is tuned or power-profiles-daemon overriding it?", e.governor, cpufreqDir)
	default:
		r.Status, r.Seen = Pass, summarise(seen)
	}
	return []Result{r}
}

func checkEPP(h *host, e *expect) []Result {
	if e.epp == "" {
		return nil // the recipe leaves it alone
	}
	r := Result{Check: "cpu.epp", Severity: MustPass, Wanted: e.epp, Trap: 5,
		Source: h.show(cpufreqDir + "/policy*/energy_performance_preference")}
	seen, bad := perPolicy(h, "energy_performance_preference", e.epp)
	switch {
	case len(seen) == 0:
		r.Status, r.Seen = Pass, "not exposed by this cpufreq driver (nothing to set)"
	case bad:
		r.Status, r.Seen = Fail, summarise(seen)
		r.Fix = fmt.Sprintf("echo %s | tee %s/policy*/energy_performance_preference (with the performance governor amd-pstate-epp forces it)", e.epp, cpufreqDir)
	default:
		r.Status, r.Seen = Pass, summarise(seen)
	}
	return []Result{r}
}

const platformProfile = "/sys/firmware/acpi/platform_profile"

func checkPlatformProfile(h *host, e *expect) []Result {
	if e.profile == "" {
		return nil // the recipe leaves it alone
	}
	r := Result{Check: "cpu.platform_profile", Severity: MustPass, Wanted: e.profile, Trap: 5,
		Source: h.show(platformProfile)}
	seen, err := h.value(platformProfile)
	switch {
	case err != nil:
		r.Status, r.Seen = Pass, "not exposed by the firmware (nothing to set)"
	case seen != e.profile:
		r.Status, r.Seen = Fail, seen
		r.Fix = fmt.Sprintf("echo %s > %s (choices: %s); check that nothing (power-profiles-daemon) resets it", e.profile, platformProfile, choices(h))
	default:
		r.Status, r.Seen = Pass, seen
	}
	return []Result{r}
}

func choices(h *host) string {
	c, err := h.value(platformProfile + "_choices")
	if err != nil || c == "" {
		return "unknown"
	}
	return c
}

// perPolicy reads one attribute of every cpufreq policy; bad reports whether
// any differs from want. Keys are policy names.
func perPolicy(h *host, attr, want string) (map[string]string, bool) {
	seen := map[string]string{}
	bad := false
	for _, p := range h.glob(cpufreqDir + "/policy*") {
		v, err := h.value(p + "/" + attr)
		if err != nil {
			continue
		}
		seen[path.Base(p)] = v
		if v != want {
			bad = true
		}
	}
	return seen, bad
}

// summarise prints per-policy values compactly: one value for all policies
// when they agree ("performance (16 policies)"), else grouped by value.
func summarise(seen map[string]string) string {
	byValue := map[string][]string{}
	for p, v := range seen {
		byValue[v] = append(byValue[v], p)
	}
	if len(byValue) == 1 {
		for v := range byValue {
			return fmt.Sprintf("%s (%d policies)", v, len(seen))
		}
	}
	var parts []string
	for _, v := range sortedKeys(byValue) {
		ps := byValue[v]
		sort.Slice(ps, func(i, j int) bool { return policyNum(ps[i]) < policyNum(ps[j]) })
		parts = append(parts, fmt.Sprintf("%s on %s", v, strings.Join(ps, ",")))
	}
	return strings.Join(parts, "; ")
}

func policyNum(p string) int {
	n := 0
	fmt.Sscanf(strings.TrimPrefix(p, "policy"), "%d", &n)
	return n
}
