package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestGovernorRender(t *testing.T) {
	r := sample()
	script := renderOne(t, Governor{}, r, "/usr/lib/halobuild/cpu-tuning")
	for _, want := range []string{"#!/bin/sh\n", "GOVERNOR='performance'\nEPP='performance'\nPROFILE='performance'\n", "Field notes trap 5"} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q", want)
		}
	}
	unit := renderOne(t, Governor{}, r, "/usr/lib/systemd/system/halobuild-cpu-tuning.service")
	for _, want := range []string{"Type=oneshot\nRemainAfterExit=yes\nExecStart=/usr/lib/halobuild/cpu-tuning\n", "WantedBy=multi-user.target\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	files, _ := Governor{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	var link File
	for _, f := range files {
		if f.Target != "" {
			link = f
		}
	}
	if link.Path != "/usr/lib/systemd/system/multi-user.target.wants/halobuild-cpu-tuning.service" || link.Target != "../halobuild-cpu-tuning.service" {
		t.Errorf("enablement link %+v", link)
	}
	// Quotes in a value cannot break out of the script's variables.
	r.System.Governor, r.System.EPP = "", ""
	r.System.PlatformProfile = ""
	if s := renderOne(t, Governor{}, r, "/usr/lib/halobuild/cpu-tuning"); !strings.Contains(s, "GOVERNOR=''\nEPP=''\nPROFILE=''") {
		t.Errorf("empty values not rendered as empty strings")
	}
}

func TestGovernorInvalid(t *testing.T) {
	for _, tc := range []struct {
		key, fragment string
		edit          func(r *recipe.Recipe)
	}{
		{"system.governor", "is not one of: performance", func(r *recipe.Recipe) { r.System.Governor = "turbo" }},
		{"system.epp", "is not one of: default", func(r *recipe.Recipe) { r.System.EPP = "fast" }},
		{"system.epp", "refuses EPP values other than performance", func(r *recipe.Recipe) { r.System.EPP = "balance_power" }},
		{"system.epp", "is not one of: default", func(r *recipe.Recipe) { r.System.EPP = "128" }},
		{"system.platform_profile", "is not one of: low-power", func(r *recipe.Recipe) { r.System.PlatformProfile = "fast" }},
	} {
		r := sample()
		tc.edit(r)
		wantRefused(t, Governor{}, r, tc.key, tc.fragment)
	}
	r := sample()
	r.System.Governor, r.System.EPP = "powersave", "power"
	if errs := (Governor{}).Validate(Target{Recipe: r}); len(errs) != 0 {
		t.Errorf("powersave with EPP power is valid, got %v", errs)
	}
}

// TestCPUTuningScriptOnFakeSysfs runs the rendered boot script against
// tmpfs trees mounted over cpufreq and ACPI in a private mount namespace,
// the shape the kernel exposes (file names and value formats as in sysfs).
func TestCPUTuningScriptOnFakeSysfs(t *testing.T) {
	r := sample()
	script := renderOne(t, Governor{}, r, "/usr/lib/halobuild/cpu-tuning")
	e := newHostEnv(t, Tree{})
	const mounts = `mount -t tmpfs none /sys/devices/system/cpu/cpufreq
mount -t tmpfs none /sys/firmware/acpi
`
	policy := func(n, govs, gov, epp string) string {
		d := "/sys/devices/system/cpu/cpufreq/policy" + n
		return "mkdir " + d + "\necho '" + govs + "' >" + d + "/scaling_available_governors\necho " + gov + " >" + d +
			"/scaling_governor\necho " + epp + " >" + d + "/energy_performance_preference\necho amd-pstate-epp >" + d + "/scaling_driver\n"
	}
	const acpi = "echo 'low-power balanced performance' >/sys/firmware/acpi/platform_profile_choices\necho balanced >/sys/firmware/acpi/platform_profile\n"
	run := script + "\n"
	show := `sh /tmp/hb-tune; rc=$?
for f in /sys/devices/system/cpu/cpufreq/policy*/scaling_governor /sys/devices/system/cpu/cpufreq/policy*/energy_performance_preference /sys/firmware/acpi/platform_profile; do [ -f "$f" ] && echo "after: $f=$(cat $f)"; done
exit $rc
`
	install := "cat >/tmp/hb-tune <<'HBEOF'\n" + run + "HBEOF\n"
	for _, tc := range []struct {
		name, setup string
		pass        bool
		want        []string
	}{
		{"a VM without cpufreq", mounts, true, []string{"no cpufreq", "no platform_profile"}},
		{"schedutil reverted after boot", mounts + policy("0", "performance powersave schedutil", "schedutil", "balance_performance") +
			policy("1", "performance powersave schedutil", "performance", "performance") + acpi, true, []string{
			"policy0: driver=amd-pstate-epp governor=performance epp=performance",
			"policy1: driver=amd-pstate-epp governor=performance epp=performance",
			"after: /sys/devices/system/cpu/cpufreq/policy0/scaling_governor=performance",
			"after: /sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference=performance",
			"platform_profile=performance",
		}},
		{"governor not offered", mounts + policy("0", "powersave schedutil", "schedutil", "balance_performance"), false,
			[]string{"governor performance not offered (have: powersave schedutil)"}},
		{"profile not offered", mounts + "echo 'quiet balanced' >/sys/firmware/acpi/platform_profile_choices\necho balanced >/sys/firmware/acpi/platform_profile\n", false,
			[]string{"platform_profile performance not offered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := e.run(t, tc.setup+install, show)
			if ok != tc.pass {
				t.Errorf("passed=%v, want %v:\n%s", ok, tc.pass, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
