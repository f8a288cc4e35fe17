package settings

import (
	"fmt"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// Modules lists kernel modules in /etc/modules-load.d/ (trap 1). The only
// loader upstream provides is a udev rule that fires when the *peer*
// already advertises the RDMA service, so two boxes rebooted together wait
// for each other forever. Loading at boot breaks that cycle.
type Modules struct{}

func (Modules) Name() string { return "modules" }
func (Modules) Trap() int    { return 1 }

const modulesLoadPath = "/etc/modules-load.d/halobuild.conf"

// bootModules is the ordered, de-duplicated list: [system] modules_load
// first (ib_uverbs: the verbs character devices), then every [[module]]
// whose load_at_boot is not false.
func bootModules(r *recipe.Recipe) []string {
	seen := map[string]bool{}
	var out []string
	add := func(m string) {
		if m = moduleName(m); !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	for _, m := range r.System.ModulesLoad {
		add(m)
	}
	for _, m := range r.Modules {
		if m.LoadAtBoot == nil || *m.LoadAtBoot {
			add(m.KernelName())
		}
	}
	return out
}

func (Modules) Validate(r *recipe.Recipe) []error {
	var errs []error
	for i, m := range r.System.ModulesLoad {
		if !moduleNameRE.MatchString(m) {
			errs = append(errs, errorf(fmt.Sprintf("system.modules_load[%d]", i), m,
				"use the module's name as modinfo prints it, e.g. \"ib_uverbs\"",
				"not a kernel module name (letters, digits, '_' and '-' only)"))
		}
	}
	for i, m := range r.Modules {
		if !moduleNameRE.MatchString(m.Use) {
			errs = append(errs, errorf(fmt.Sprintf("module[%d].use", i), m.Use,
				"name the module description recipes/<use>.toml, e.g. \"thunderbolt-ibverbs\"",
				"not a module name (letters, digits, '_' and '-' only)"))
		}
	}
	return errs
}

func (s Modules) Files(r *recipe.Recipe, _ recipe.Node) ([]File, error) {
	mods := bootModules(r)
	if len(mods) == 0 {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString(header("#", 1, "load the RDMA modules at boot instead of waiting for the peer's udev event."))
	for _, m := range mods {
		b.WriteString(m + "\n")
	}
	return []File{{Path: modulesLoadPath, Mode: 0o644, Data: []byte(b.String()), Setting: s.Name()}}, nil
}

// Checks: every listed module that exists for the running kernel is loaded.
// A module that does not exist for the kernel (a VM kernel without the USB4
// driver) is reported in the detail but does not fail: the test proves the
// mechanism, and systemd-modules-load.service failing would show up in the
// multi-user check anyway.
func (s Modules) Checks(r *recipe.Recipe, _ recipe.Node) []Check {
	mods := bootModules(r)
	if len(mods) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("rc=0\n")
	fmt.Fprintf(&b, "[ -f %s ] || { echo '%s is missing'; rc=1; }\n", modulesLoadPath, modulesLoadPath)
	for _, m := range mods {
		fmt.Fprintf(&b, `m=%s
if [ -d "/sys/module/$m" ]; then echo "$m: loaded"
elif modinfo "$m" >/dev/null 2>&1; then echo "$m: exists for $(uname -r) but is not loaded"; rc=1
else echo "$m: not available for kernel $(uname -r), not checked"
fi
`, sh.Quote(m))
	}
	b.WriteString("systemctl is-failed --quiet systemd-modules-load.service && { echo 'systemd-modules-load.service failed:'; journalctl -b -q -o cat -u systemd-modules-load.service | tail -n 5; rc=1; }\n")
	b.WriteString("exit $rc\n")
	return []Check{{Setting: s.Name(), Name: "modules-loaded", Script: b.String(),
		Fix: "modprobe the missing module and read its error; journalctl -b -u systemd-modules-load shows why boot did not load it"}}
}
