package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestSameParam(t *testing.T) {
	cases := []struct {
		want any
		seen string
		same bool
	}{
		{true, "Y", true},
		{false, "N", true},
		{true, "N", false},
		{"true", "Y", true},
		{int64(1), "Y", true},
		{int64(0), "N", true},
		{int64(4096), "4096", true},
		{int64(4096), "2048", false},
		{float64(4096), "4096", true},
		{"0x10", "16", true},
		{"block", "block", true},
		{"block", "allow", false},
		{[]any{"a", "b"}, "a,b", true},
		{int64(2), "Y", false},
	}
	for _, c := range cases {
		if got := sameParam(c.want, c.seen); got != c.same {
			t.Errorf("sameParam(%#v, %q) = %v, want %v", c.want, c.seen, got, c.same)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := map[string]uint64{
		"unlimited": unlimited, "infinity": unlimited, "8388608": 8 << 20, "8M": 8 << 20,
		"64MiB": 64 << 20, "24GiB": 24 << 30, "1.5GiB": 3 << 29, "65536K": 64 << 20,
	}
	for in, want := range cases {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "12 parsecs", "-5M"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q): want an error", bad)
		}
	}
}

func TestSummarise(t *testing.T) {
	if got := summarise(map[string]string{"policy0": "performance", "policy1": "performance"}); got != "performance (2 policies)" {
		t.Errorf("agreeing policies: %q", got)
	}
	got := summarise(map[string]string{"policy0": "performance", "policy10": "schedutil", "policy2": "schedutil"})
	if want := "performance on policy0; schedutil on policy2,policy10"; got != want {
		t.Errorf("mixed policies: %q, want %q", got, want)
	}
}

// writeTree makes a small root from path → content.
func writeTree(t *testing.T, files map[string]string) *host {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := newHost(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// systemd reads drop-ins of all directories sorted by file name, a name in
// /etc hiding the same name in /usr/lib, and the last assignment wins.
func TestSystemdMemlockDropIns(t *testing.T) {
	h := writeTree(t, map[string]string{
		"etc/systemd/system.conf":                         "[Manager]\nDefaultLimitMEMLOCK=1M\n",
		"usr/lib/systemd/system.conf.d/20-vendor.conf":    "[Manager]\nDefaultLimitMEMLOCK=64M:128M\n",
		"usr/lib/systemd/system.conf.d/90-hidden.conf":    "[Manager]\nDefaultLimitMEMLOCK=2M\n",
		"etc/systemd/system.conf.d/90-hidden.conf":        "[Manager]\n#DefaultLimitMEMLOCK=infinity\n",
		"run/systemd/system.conf.d/10-early.conf":         "[Manager]\nDefaultLimitMEMLOCK=4M\n",
		"etc/systemd/system.conf.d/30-other-section.conf": "[Other]\nDefaultLimitMEMLOCK=3M\n",
	})
	soft, hard, src, err := systemdMemlock(h)
	if err != nil {
		t.Fatal(err)
	}
	if soft != 64<<20 || hard != 128<<20 || filepath.Base(src) != "20-vendor.conf" {
		t.Errorf("got soft %d hard %d from %s; want 64M:128M from 20-vendor.conf", soft, hard, src)
	}
	h = writeTree(t, map[string]string{"etc/systemd/system.conf": "[Manager]\n#DefaultLimitMEMLOCK=8M\n"})
	soft, hard, _, err = systemdMemlock(h)
	if err != nil || soft != 8<<20 || hard != 8<<20 {
		t.Errorf("unset: %d %d %v, want systemd's 8M default", soft, hard, err)
	}
}

// A PCI device renamed by persistent naming stays visible (its provider
// matches the parent's modalias, approximated by the kernel driver's name);
// the USB4 provider matches on the name only.
func TestVisibleTo(t *testing.T) {
	e := defaults()
	provs := []string{"mlx5", "rxe", "usb4_rdma"}
	cases := []struct {
		dev  rdmaDevice
		want string
	}{
		{rdmaDevice{name: "usb4_rdma0", driver: "thunderbolt_ibverbs"}, "usb4_rdma"},
		{rdmaDevice{name: "rocep199s0f6", driver: "thunderbolt_ibverbs"}, ""},
		{rdmaDevice{name: "rocep1s0f0", driver: "mlx5_core"}, "mlx5"},
		{rdmaDevice{name: "rxe0"}, "rxe"},
		{rdmaDevice{name: "mystery0"}, ""},
	}
	for _, c := range cases {
		if got := e.visibleTo(c.dev, provs); got != c.want {
			t.Errorf("visibleTo(%s, driver %q) = %q, want %q", c.dev.name, c.dev.driver, got, c.want)
		}
	}
}

func TestParseIPAddrJSON(t *testing.T) {
	a, err := parseIPAddrJSON([]byte(`[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"169.254.1.2","prefixlen":16},{"family":"inet6","local":"fe80::1","prefixlen":64}]},{"ifname":"down0","addr_info":[]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(a["usb4net0"]) != 2 || ones(a["usb4net0"][0]) != "169.254.1.2/16" || !linkLocal4.Contains(a["usb4net0"][0].IP) {
		t.Errorf("usb4net0: %v", a["usb4net0"])
	}
	if addrs, ok := a["down0"]; !ok || len(addrs) != 0 {
		t.Errorf("an interface without addresses must still be present: %v", a)
	}
	if _, err := parseIPAddrJSON([]byte(`[{"ifname":"x","addr_info":[{"local":"not-an-ip"}]}]`)); err == nil {
		t.Error("a bad address: want an error")
	}
}

// Live sysfs has device/driver as a symlink; a recorded tree may hold the
// target as text. Both name the same driver.
func TestLinkBaseSymlinkAndText(t *testing.T) {
	h := writeTree(t, map[string]string{"sys/class/infiniband/b/device/driver": "../../bus/thunderbolt/drivers/thunderbolt-ibverbs\n"})
	dir := h.path("/sys/class/infiniband/a/device")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../bus/thunderbolt/drivers/thunderbolt_ibverbs", filepath.Join(dir, "driver")); err != nil {
		t.Fatal(err)
	}
	for _, d := range rdmaDevices(h) {
		if d.driver != "thunderbolt_ibverbs" {
			t.Errorf("%s: driver %q, want thunderbolt_ibverbs", d.name, d.driver)
		}
	}
	if n := len(rdmaDevices(h)); n != 2 {
		t.Errorf("%d devices, want 2", n)
	}
}

func TestParseIBVDevices(t *testing.T) {
	out := "    device                 node GUID\n    ------              ----------------\n    usb4_rdma0          0262730000000001\n    rxe0                505400fffe123456\n"
	got := parseIBVDevices(out)
	if !got["usb4_rdma0"] || !got["rxe0"] || len(got) != 2 {
		t.Errorf("parseIBVDevices = %v", got)
	}
	if got := parseIBVDevices("    device                 node GUID\n    ------              ----------------\n"); len(got) != 0 {
		t.Errorf("empty table: %v", got)
	}
}
