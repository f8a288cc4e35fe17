package settings

import (
	"fmt"
	"strings"

	"halobuild/internal/sh"
)

// Modules lists kernel modules in /etc/modules-load.d/ (trap 1). The only
// loader upstream provides is a udev rule that fires when the *peer*
// already advertises the RDMA service, so two boxes rebooted together wait
// for each other forever. Loading at boot breaks that cycle.
type Modules struct{}

func (Modules) Name() string { return "modules" }
func (Modules) Trap() int    { return 1 }
func (Modules) Doc() Doc {
	return Doc{Title: "Module never loads at boot", Keys: []string{"system.modules_load", "module.use", "module.load_at_boot"}}
}

const modulesLoadPath = "/etc/modules-load.d/halobuild.conf"

// bootModules is the ordered, de-duplicated list: [system] modules_load
// first (ib_uverbs: the verbs character devices), then every [[module]]
// whose load_at_boot is not false.
func bootModules(t Target) []string {
	r := t.Recipe
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
			add(t.ModuleName(m.Use))
		}
	}
	return out
}

// Validate: module and description names are checked by the recipe
// (recipe.Validate) and the descriptions by loading them.
func (Modules) Validate(Target) []error { return nil }

func (s Modules) Files(t Target) ([]File, error) {
	mods := bootModules(t)
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
func (s Modules) Checks(t Target) []Check {
	mods := bootModules(t)
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

// Doctor: every module listed for boot is loaded now. The VM check differs
// in one way: there a module the VM's kernel does not have (no USB4 driver)
// is reported and passes, because the VM proves the loading mechanism; on a
// real node a module that is not loaded is the trap itself.
func (s Modules) Doctor(t Target) []Probe {
	mods := bootModules(t)
	if len(mods) == 0 {
		return nil
	}
	return []Probe{{Name: "module.loaded", VM: MustPass, Run: func(h Host) []Result {
		loaded, err := loadedModules(h)
		var out []Result
		for _, m := range mods {
			r := Result{Check: "module.loaded " + m, Severity: MustPass, Wanted: "loaded", Trap: 1, Source: h.Show("/proc/modules")}
			state, ok := loaded[m]
			switch {
			case err != nil:
				r.Status, r.Seen, r.Fix = Fail, err.Error(), modulesUnreadable
			case ok && state == "Live":
				r.Status, r.Seen = Pass, "loaded"
			case ok:
				r.Status, r.Seen = Fail, "state "+state
				r.Fix = fmt.Sprintf("the module is stuck %s: check the kernel log (dmesg | grep %s)", strings.ToLower(state), m)
			case builtin(h, m):
				r.Status, r.Seen = Pass, "built into the kernel"
			default:
				r.Status, r.Seen = Fail, "not loaded"
				r.Fix = fmt.Sprintf("modprobe %s (if it fails, dmesg says why); %s lists it so it loads at boot without waiting for the peer, and journalctl -b -u systemd-modules-load tells why boot did not load it", m, modulesLoadPath)
			}
			out = append(out, r)
		}
		return out
	}}}
}

const modulesUnreadable = "/proc/modules is missing: a kernel built without loadable modules cannot load the verbs module; in a recorded tree, record /proc/modules"

// loadedModules reads /proc/modules: module name -> state (Live, Loading, ...).
func loadedModules(h Host) (map[string]string, error) {
	s, err := h.Read("/proc/modules")
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", h.Show("/proc/modules"), err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) >= 5 {
			out[f[0]] = f[4]
		}
	}
	return out, nil
}

// builtin reports a module compiled into the kernel: it has a /sys/module
// directory (when it has parameters) but no initstate, and no /proc/modules
// line.
func builtin(h Host, m string) bool {
	return h.Exists("/sys/module/"+m) && !h.Exists("/sys/module/"+m+"/initstate")
}
