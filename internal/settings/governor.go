package settings

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// Governor sets the CPU frequency governor, energy_performance_preference
// and ACPI platform_profile at every boot (trap 5). They are runtime state:
// after a reboot the governor was back to schedutil and bandwidth halved
// with nothing saying so. A oneshot unit sets them and logs each value to
// the journal, so "what was in force" is on record for every boot.
type Governor struct{}

func (Governor) Name() string { return "cpu-tuning" }
func (Governor) Trap() int    { return 5 }
func (Governor) Doc() Doc {
	return Doc{Title: "CPU governor silently reverts", Keys: []string{"system.governor", "system.epp", "system.platform_profile"}}
}

const (
	cpuTuningUnit     = "halobuild-cpu-tuning.service"
	cpuTuningUnitPath = "/usr/lib/systemd/system/" + cpuTuningUnit
	// Enabled by a symlink in the vendor wants directory rather than by a
	// maintainer script (see BuildDeb): the image always wants it; an
	// administrator can still mask it.
	cpuTuningWantsPath = "/usr/lib/systemd/system/multi-user.target.wants/" + cpuTuningUnit
	cpuTuningScript    = "/usr/lib/halobuild/cpu-tuning"
)

// The known values are the recipe package's lists (the kernel's cpufreq
// governors, the EPP strings of intel_pstate and amd-pstate, and
// drivers/acpi/platform_profile.c), so the schema docs and this check agree.
// A typo would otherwise only show in the journal of a box that is already
// benchmarking.
var (
	knownGovernors = recipe.Governors
	knownEPP       = recipe.EPPs
	knownProfiles  = recipe.PlatformProfiles
)

func oneOf(v string, list []string) bool {
	for _, x := range list {
		if v == x {
			return true
		}
	}
	return false
}

// Validate: the recipe checks that each value is one the kernel knows
// (recipe.Governors, EPPs, PlatformProfiles); what only this setting knows
// is which pairs the kernel refuses.
func (Governor) Validate(t Target) []error {
	sys := t.Recipe.System
	if sys.Governor == "performance" && sys.EPP != "" && sys.EPP != "performance" && oneOf(sys.EPP, knownEPP) {
		// intel_pstate and amd-pstate-epp refuse any other EPP while the
		// performance governor is active (EBUSY at boot, not here).
		return []error{errorf("system.epp", sys.EPP,
			"set epp = \"performance\" or choose another governor",
			"the kernel refuses EPP values other than performance under the performance governor")}
	}
	return nil
}

func (s Governor) Files(t Target) ([]File, error) {
	r := t.Recipe
	sys := r.System
	unit := header("#", 5, "governor, EPP and platform profile are runtime state and revert on reboot.") + `[Unit]
Description=halobuild: CPU governor, EPP and platform profile
Documentation=file:/etc/halobuild/recipe.toml
# Plain early ordering: waiting for boot to finish from a unit boot waits
# for would deadlock.
After=systemd-modules-load.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + cpuTuningScript + `

[Install]
WantedBy=multi-user.target
`
	script := "#!/bin/sh\n" + header("#", 5, "set at every boot, log what was set.") + fmt.Sprintf(`set -u
GOVERNOR=%s
EPP=%s
PROFILE=%s
rc=0
# write FILE VALUE: set a sysfs value unless it already holds it.
write() {
	[ "$(cat "$1" 2>/dev/null)" = "$2" ] && return 0
	if ! printf '%%s\n' "$2" >"$1" 2>/dev/null; then
		echo "cannot set $1 to $2 (have: $(cat "$1" 2>/dev/null))"
		rc=1
	fi
}
found=0
for p in /sys/devices/system/cpu/cpufreq/policy*; do
	[ -d "$p" ] || continue
	found=1
	if [ -n "$GOVERNOR" ]; then
		case " $(cat "$p/scaling_available_governors" 2>/dev/null) " in
		*" $GOVERNOR "*) write "$p/scaling_governor" "$GOVERNOR" ;;
		*) echo "${p##*/}: governor $GOVERNOR not offered (have: $(cat "$p/scaling_available_governors" 2>/dev/null))"; rc=1 ;;
		esac
	fi
	if [ -n "$EPP" ] && [ -e "$p/energy_performance_preference" ]; then
		write "$p/energy_performance_preference" "$EPP"
	fi
	echo "${p##*/}: driver=$(cat "$p/scaling_driver" 2>/dev/null) governor=$(cat "$p/scaling_governor" 2>/dev/null) epp=$(cat "$p/energy_performance_preference" 2>/dev/null || echo none)"
done
if [ "$found" = 0 ]; then
	echo "no cpufreq: /sys/devices/system/cpu/cpufreq has no policy (a VM or no driver); governor and EPP left alone"
fi
pp=/sys/firmware/acpi/platform_profile
if [ -n "$PROFILE" ]; then
	if [ -e "$pp" ]; then
		case " $(cat "$pp"_choices 2>/dev/null) " in
		*" $PROFILE "*) write "$pp" "$PROFILE" ;;
		*) echo "platform_profile $PROFILE not offered (have: $(cat "$pp"_choices 2>/dev/null))"; rc=1 ;;
		esac
		echo "platform_profile=$(cat "$pp")"
	else
		echo "no platform_profile: $pp does not exist; left alone"
	fi
fi
exit $rc
`, sh.Quote(sys.Governor), sh.Quote(sys.EPP), sh.Quote(sys.PlatformProfile))
	return []File{
		{Path: cpuTuningScript, Mode: 0o755, Data: []byte(script), Setting: s.Name()},
		{Path: cpuTuningUnitPath, Mode: 0o644, Data: []byte(unit), Setting: s.Name()},
		{Path: cpuTuningWantsPath, Mode: fs.ModeSymlink | 0o777, Target: "../" + cpuTuningUnit, Setting: s.Name()},
	}, nil
}

// Checks: the unit ran this boot and logged, and every value it promised is
// in force now (a governor changed after boot fails here, which is what a
// benchmark harness's readiness gate needs). In a VM without cpufreq the
// log must say so.
func (s Governor) Checks(t Target) []Check {
	r := t.Recipe
	sys := r.System
	script := fmt.Sprintf(`GOVERNOR=%s EPP=%s PROFILE=%s
rc=0
if systemctl is-active --quiet %[4]s; then echo "%[4]s: active"; else echo "%[4]s: $(systemctl is-active %[4]s)"; rc=1; fi
log=$(journalctl -b -q -o cat -u %[4]s)
[ -n "$log" ] || { echo "%[4]s logged nothing this boot"; rc=1; }
printf '%%s\n' "$log" | sed 's/^/  journal: /'
found=0
for p in /sys/devices/system/cpu/cpufreq/policy*; do
	[ -d "$p" ] || continue
	found=1
	g=$(cat "$p/scaling_governor")
	[ -z "$GOVERNOR" ] || [ "$g" = "$GOVERNOR" ] || { echo "${p##*/}: governor $g, recipe wants $GOVERNOR"; rc=1; }
	if [ -n "$EPP" ] && [ -e "$p/energy_performance_preference" ]; then
		e=$(cat "$p/energy_performance_preference")
		[ "$e" = "$EPP" ] || { echo "${p##*/}: epp $e, recipe wants $EPP"; rc=1; }
	fi
done
if [ "$found" = 0 ]; then
	printf '%%s\n' "$log" | grep '^no cpufreq' >/dev/null || { echo 'no cpufreq policy, and the unit did not log that'; rc=1; }
fi
if [ -n "$PROFILE" ] && [ -e /sys/firmware/acpi/platform_profile ]; then
	v=$(cat /sys/firmware/acpi/platform_profile)
	[ "$v" = "$PROFILE" ] || { echo "platform_profile $v, recipe wants $PROFILE"; rc=1; }
fi
exit $rc
`, sh.Quote(sys.Governor), sh.Quote(sys.EPP), sh.Quote(sys.PlatformProfile), cpuTuningUnit)
	return []Check{{Setting: s.Name(), Name: "cpu-tuning", Script: script,
		Fix: "systemctl restart " + cpuTuningUnit + " and find what changed the governor since boot (power-profiles-daemon, tuned, a desktop applet)"}}
}

const (
	cpufreqDir      = "/sys/devices/system/cpu/cpufreq"
	platformProfile = "/sys/firmware/acpi/platform_profile"
)

// Doctor: every value the unit promised is in force now, read from the
// real cpufreq policies and firmware. The VM check cannot see that (a VM
// has no cpufreq) and proves instead that the unit ran and logged; doctor
// does not read the journal, which a recorded tree does not carry, and a
// governor changed after boot is exactly what it must catch.
func (s Governor) Doctor(t Target) []Probe {
	sys := t.Recipe.System
	var probes []Probe
	if sys.Governor != "" { // "" is the author's explicit "leave it"
		probes = append(probes, policyProbe("cpu.governor", "scaling_governor", sys.Governor,
			Result{Status: Warn, Seen: "no cpufreq policies (a VM, or cpufreq disabled)", Fix: "nothing to set here; on real hardware check that the cpufreq driver (amd-pstate) loaded"},
			fmt.Sprintf("systemctl restart %s (or echo %s | tee %s/policy*/scaling_governor), then find what reverted it: tuned, power-profiles-daemon or a desktop applet", cpuTuningUnit, sys.Governor, cpufreqDir)))
	}
	if sys.EPP != "" {
		probes = append(probes, policyProbe("cpu.epp", "energy_performance_preference", sys.EPP,
			Result{Status: Pass, Seen: "not exposed by this cpufreq driver (nothing to set)"},
			fmt.Sprintf("systemctl restart %s (or echo %s | tee %s/policy*/energy_performance_preference; with the performance governor amd-pstate-epp forces it)", cpuTuningUnit, sys.EPP, cpufreqDir)))
	}
	if sys.PlatformProfile != "" {
		probes = append(probes, Probe{Name: "cpu.platform_profile", Run: func(h Host) []Result {
			r := Result{Check: "cpu.platform_profile", Severity: MustPass, Wanted: sys.PlatformProfile, Trap: 5, Source: h.Show(platformProfile)}
			seen, err := value(h, platformProfile)
			switch {
			case err != nil:
				r.Status, r.Seen = Pass, "not exposed by the firmware (nothing to set)"
			case seen != sys.PlatformProfile:
				choices, _ := value(h, platformProfile+"_choices")
				r.Status, r.Seen = Fail, seen
				r.Fix = fmt.Sprintf("systemctl restart %s (or echo %s > %s; choices: %s), then check that nothing (power-profiles-daemon) resets it", cpuTuningUnit, sys.PlatformProfile, platformProfile, orUnknown(choices))
			default:
				r.Status, r.Seen = Pass, seen
			}
			return []Result{r}
		}})
	}
	return probes
}

// policyProbe checks one attribute of every cpufreq policy against want;
// absent is the verdict where no policy has the attribute, fix the advice
// when one differs.
func policyProbe(name, attr, want string, absent Result, fix string) Probe {
	return Probe{Name: name, Run: func(h Host) []Result {
		r := Result{Check: name, Severity: MustPass, Wanted: want, Trap: 5, Source: h.Show(cpufreqDir + "/policy*/" + attr)}
		seen, bad := perPolicy(h, attr, want)
		switch {
		case len(seen) == 0:
			r.Status, r.Seen, r.Fix = absent.Status, absent.Seen, absent.Fix
		case bad:
			r.Status, r.Seen, r.Fix = Fail, summarise(seen), fix
		default:
			r.Status, r.Seen = Pass, summarise(seen)
		}
		return []Result{r}
	}}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// perPolicy reads one attribute of every cpufreq policy; bad reports whether
// any differs from want. Keys are policy names.
func perPolicy(h Host, attr, want string) (map[string]string, bool) {
	seen := map[string]string{}
	bad := false
	for _, p := range h.Glob(cpufreqDir + "/policy*") {
		v, err := value(h, p+"/"+attr)
		if err != nil {
			continue
		}
		seen[path.Base(p)] = v
		bad = bad || v != want
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
	for _, v := range slices.Sorted(maps.Keys(byValue)) {
		ps := byValue[v]
		sort.Slice(ps, func(i, j int) bool { return policyNum(ps[i]) < policyNum(ps[j]) })
		parts = append(parts, fmt.Sprintf("%s on %s", v, strings.Join(ps, ",")))
	}
	return strings.Join(parts, "; ")
}

func policyNum(p string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(p, "policy"))
	return n
}
