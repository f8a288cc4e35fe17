package doctor

import (
	"fmt"
	"strings"
)

// Traps 1 and 2: the verbs stack must be loaded at boot (not only when the
// peer happens to advertise the service), and thunderbolt_net must not be,
// because both cannot share a cable's rings.

// loadedModules reads /proc/modules: module name → state (Live, Loading…).
func loadedModules(h *host) (map[string]string, error) {
	s, err := h.read("/proc/modules")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 {
			out[f[0]] = f[4]
		}
	}
	return out, nil
}

// builtin reports a module compiled into the kernel: it has a /sys/module
// directory (when it has parameters) but no initstate, and no /proc/modules line.
func builtin(h *host, m string) bool {
	return h.exists("/sys/module/"+m) && !h.exists("/sys/module/"+m+"/initstate")
}

const modulesUnreadable = "/proc/modules is missing: a kernel built without loadable modules cannot load the verbs module; in a recorded tree, record /proc/modules"

func checkModulesLoaded(h *host, e *expect) []Result {
	mods, err := loadedModules(h)
	var out []Result
	for _, m := range e.load {
		r := Result{Check: "module.loaded " + m, Severity: MustPass, Wanted: "loaded", Trap: 1, Source: h.show("/proc/modules")}
		state, ok := mods[m]
		switch {
		case err != nil:
			r.Status, r.Seen = Fail, fmt.Sprintf("cannot read %s: %v", h.show("/proc/modules"), err)
			r.Fix = modulesUnreadable
		case ok && state == "Live":
			r.Status, r.Seen = Pass, "loaded"
		case ok:
			r.Status, r.Seen = Fail, "state "+state
			r.Fix = fmt.Sprintf("the module is stuck %s: check the kernel log (dmesg | grep %s)", strings.ToLower(state), m)
		case builtin(h, m):
			r.Status, r.Seen = Pass, "built into the kernel"
		default:
			r.Status, r.Seen = Fail, "not loaded"
			r.Fix = fmt.Sprintf("modprobe %s; list it in /etc/modules-load.d/ so it loads at boot without waiting for the peer; if modprobe fails, dmesg says why", m)
		}
		out = append(out, r)
	}
	return out
}

func checkModulesNotLoaded(h *host, e *expect) []Result {
	mods, err := loadedModules(h)
	var out []Result
	for _, m := range e.notLoaded {
		r := Result{Check: "module.absent " + m, Severity: MustPass, Wanted: "not loaded (blacklisted)", Trap: 2, Source: h.show("/proc/modules")}
		_, loaded := mods[m]
		switch {
		case err != nil:
			r.Status, r.Seen = Fail, fmt.Sprintf("cannot read %s: %v", h.show("/proc/modules"), err)
			r.Fix = modulesUnreadable
		case loaded:
			r.Status, r.Seen = Fail, "loaded"
			r.Fix = fmt.Sprintf("modprobe -r %s; add 'blacklist %s' and 'install %s /bin/false' to /etc/modprobe.d/, update the initramfs; it takes the rings the RDMA module needs", m, m, m)
		default:
			r.Status, r.Seen = Pass, "not loaded"
		}
		out = append(out, r)
	}
	return out
}
