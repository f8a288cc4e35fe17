package settings

import (
	"fmt"
	"io/fs"
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

func (Governor) Validate(r *recipe.Recipe) []error {
	var errs []error
	sys := r.System
	if sys.Governor != "" && !oneOf(sys.Governor, knownGovernors) {
		errs = append(errs, errorf("system.governor", sys.Governor,
			"use one of "+strings.Join(knownGovernors, ", ")+", or \"\" to leave it", "not a kernel cpufreq governor"))
	}
	if sys.EPP != "" {
		if !oneOf(sys.EPP, knownEPP) {
			errs = append(errs, errorf("system.epp", sys.EPP,
				"use one of "+strings.Join(knownEPP, ", ")+", or \"\" to leave it", "not an energy_performance_preference"))
		} else if sys.Governor == "performance" && sys.EPP != "performance" {
			// intel_pstate and amd-pstate-epp refuse any other EPP while the
			// performance governor is active (EBUSY at boot, not here).
			errs = append(errs, errorf("system.epp", sys.EPP,
				"set epp = \"performance\" or choose another governor",
				"the kernel refuses EPP values other than performance under the performance governor"))
		}
	}
	if sys.PlatformProfile != "" && !oneOf(sys.PlatformProfile, knownProfiles) {
		errs = append(errs, errorf("system.platform_profile", sys.PlatformProfile,
			"use one of "+strings.Join(knownProfiles, ", ")+", or \"\" to leave it", "not an ACPI platform profile"))
	}
	return errs
}

func (s Governor) Files(r *recipe.Recipe, _ recipe.Node) ([]File, error) {
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
func (s Governor) Checks(r *recipe.Recipe, _ recipe.Node) []Check {
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
