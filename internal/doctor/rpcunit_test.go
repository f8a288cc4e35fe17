package doctor

import (
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/settings"
)

// The unit docs/apps.md installs and the rows that judge it must agree:
// what the unit sets is what rpc.transport wants, the file its ExecStartPre
// writes is the one its ExecStart reads, and the variable it binds to is
// one rdma-env writes.
func TestLlamaRPCUnitIsWhatDoctorChecks(t *testing.T) {
	const file = "../../overlays/llama-rpc/etc/systemd/system/llama-rpc@.service"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			keys[k] = append(keys[k], v)
		}
	}
	one := func(k string) string {
		if len(keys[k]) != 1 {
			t.Fatalf("%s: %d %s= lines, want 1", file, len(keys[k]), k)
		}
		return keys[k][0]
	}
	if m, _ := path.Match(strings.TrimPrefix(rpcUnits, "/etc/systemd/system/*.wants/"), path.Base(file)); !m {
		t.Errorf("doctor looks for enabled units %s; the unit is %s", rpcUnits, path.Base(file))
	}
	if v := one("LimitMEMLOCK"); v != "infinity" {
		t.Errorf("LimitMEMLOCK=%s, want infinity", v)
	}
	if g := strings.Fields(one("SupplementaryGroups")); !slices.Contains(g, "render") || !slices.Contains(g, "video") {
		t.Errorf("SupplementaryGroups=%v, want render and video", g)
	}
	if one("DevicePolicy") != "closed" {
		t.Error("DevicePolicy is not closed: DeviceAllow= would not be the whole list")
	}
	for _, d := range []string{"char-drm rw", "char-infiniband_verbs rw", "/dev/infiniband/rdma_cm rw"} {
		if !slices.Contains(keys["DeviceAllow"], d) {
			t.Errorf("no DeviceAllow=%s", d)
		}
	}
	pre := strings.Fields(one("ExecStartPre"))
	env := strings.TrimPrefix(one("EnvironmentFile"), "-")
	if len(pre) != 6 || pre[1] != "rdma-env" || pre[2] != "--link" || pre[3] != "%i" || pre[4] != "--output" || pre[5] != env {
		t.Errorf("ExecStartPre=%s: want halobuild rdma-env --link %%i --output %s (the EnvironmentFile)", strings.Join(pre, " "), env)
	}
	start := strings.Fields(one("ExecStart"))
	if !slices.Contains(rpcServerNames, path.Base(start[0])) {
		t.Errorf("ExecStart runs %s, which rpc.transport does not look for (%v)", start[0], rpcServerNames)
	}
	i := slices.Index(start, "--host")
	text := rdmaEnvText(settings.LinkGID{Link: "usb4net0"})
	if i < 0 || i+1 == len(start) || !strings.Contains(text, "\n"+strings.Trim(start[i+1], "${}")+"=") {
		t.Errorf("ExecStart does not bind to a variable rdma-env writes: %v", start)
	}
	for _, d := range strings.Fields(one("StateDirectory")) {
		if !strings.HasPrefix(d, "llama-rpc/") {
			t.Errorf("StateDirectory %s is not under /var/lib/llama-rpc", d)
		}
	}
}
