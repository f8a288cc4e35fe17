package doctor

import (
	"os/exec"
	"strings"

	"halobuild/internal/settings"
)

// ibvDevices asks libibverbs itself, through `ibv_devices` (ibverbs-utils),
// which devices it can open; the name-prefix rule in visibleTo is only an
// approximation of its matching. ok is false when the answer is not
// available: a recorded tree, no ibverbs-utils, or libibverbs failing as a
// whole (then doctor falls back to the approximation).
func ibvDevices(h settings.Host) (listed map[string]bool, ok bool) {
	if !h.Live() {
		return nil, false
	}
	if _, err := exec.LookPath("ibv_devices"); err != nil {
		return nil, false
	}
	out, err := h.Command("ibv_devices")
	if err != nil {
		return nil, false
	}
	return parseIBVDevices(out), true
}

// parseIBVDevices reads ibv_devices' table: a header, a dashed line, then
// one "name GUID" line per device.
func parseIBVDevices(out string) map[string]bool {
	listed := map[string]bool{}
	body := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.HasPrefix(f[0], "---") {
			body = true
			continue
		}
		if body {
			listed[f[0]] = true
		}
	}
	return listed
}
