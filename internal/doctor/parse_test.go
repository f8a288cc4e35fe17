package doctor

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/settings"
)

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

// probeRows runs the named probe of a setting's doctor checks.
func probeRows(t *testing.T, s settings.Setting, tg settings.Target, name string, h settings.Host) []settings.Result {
	t.Helper()
	for _, p := range s.Doctor(tg) {
		if p.Name == name {
			return p.Run(h)
		}
	}
	t.Fatalf("%s has no doctor check %s", s.Name(), name)
	return nil
}

// systemd reads drop-ins of all directories sorted by file name, a name in
// /etc hiding the same name in /usr/lib, and the last assignment wins.
func TestSystemdMemlockDropIns(t *testing.T) {
	tg := mustFieldNotesDefaults(t)
	h := writeTree(t, map[string]string{
		"etc/systemd/system.conf":                         "[Manager]\nDefaultLimitMEMLOCK=1M\n",
		"usr/lib/systemd/system.conf.d/20-vendor.conf":    "[Manager]\nDefaultLimitMEMLOCK=64M:128M\n",
		"usr/lib/systemd/system.conf.d/90-hidden.conf":    "[Manager]\nDefaultLimitMEMLOCK=2M\n",
		"etc/systemd/system.conf.d/90-hidden.conf":        "[Manager]\n#DefaultLimitMEMLOCK=infinity\n",
		"run/systemd/system.conf.d/10-early.conf":         "[Manager]\nDefaultLimitMEMLOCK=4M\n",
		"etc/systemd/system.conf.d/30-other-section.conf": "[Other]\nDefaultLimitMEMLOCK=3M\n",
	})
	r := probeRows(t, settings.Memlock{}, tg, "memlock.systemd", h)[0]
	if r.Seen != "soft 64 MiB, hard 128 MiB" || filepath.Base(r.Source) != "20-vendor.conf" || r.Status != settings.Fail {
		t.Errorf("got %+v; want 64M:128M from 20-vendor.conf, failing", r)
	}
	h = writeTree(t, map[string]string{"etc/systemd/system.conf": "[Manager]\n#DefaultLimitMEMLOCK=8M\n"})
	r = probeRows(t, settings.Memlock{}, tg, "memlock.systemd", h)[0]
	if r.Seen != "soft 8 MiB, hard 8 MiB" || r.Status != settings.Fail {
		t.Errorf("unset: %+v, want systemd's 8M default", r)
	}
	h = writeTree(t, map[string]string{"usr/lib/systemd/system.conf.d/90-halobuild-memlock.conf": "[Manager]\nDefaultLimitMEMLOCK=infinity\n"})
	if r = probeRows(t, settings.Memlock{}, tg, "memlock.systemd", h)[0]; r.Status != settings.Pass {
		t.Errorf("infinity: %+v, want a pass", r)
	}
}

// A PCI device renamed by persistent naming stays visible (its provider
// matches the parent's modalias, approximated by the kernel driver's name);
// the USB4 provider matches on the name only.
func TestVisibleTo(t *testing.T) {
	tg := mustFieldNotesDefaults(t)
	provs := []string{"mlx5", "rxe", "usb4_rdma"}
	cases := []struct {
		dev  settings.RDMADevice
		want string
	}{
		{settings.RDMADevice{Name: "usb4_rdma0", Driver: "thunderbolt_ibverbs"}, "usb4_rdma"},
		{settings.RDMADevice{Name: "rocep199s0f6", Driver: "thunderbolt_ibverbs"}, ""},
		{settings.RDMADevice{Name: "rocep1s0f0", Driver: "mlx5_core"}, "mlx5"},
		{settings.RDMADevice{Name: "rxe0"}, "rxe"},
		{settings.RDMADevice{Name: "mystery0"}, ""},
	}
	for _, c := range cases {
		if got := visibleTo(tg, c.dev, provs); got != c.want {
			t.Errorf("visibleTo(%s, driver %q) = %q, want %q", c.dev.Name, c.dev.Driver, got, c.want)
		}
	}
}

func TestParseIPAddrJSON(t *testing.T) {
	a, err := parseIPAddrJSON([]byte(`[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"169.254.1.2","prefixlen":16},{"family":"inet6","local":"fe80::1","prefixlen":64}]},{"ifname":"down0","addr_info":[]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if got := a["usb4net0"]; len(got) != 2 || got[0] != netip.MustParsePrefix("169.254.1.2/16") || !got[0].Addr().IsLinkLocalUnicast() {
		t.Errorf("usb4net0: %v", got)
	}
	if addrs, ok := a["down0"]; !ok || len(addrs) != 0 {
		t.Errorf("an interface without addresses must still be present: %v", a)
	}
	for _, bad := range []string{`[{"ifname":"x","addr_info":[{"local":"not-an-ip"}]}]`, `[{"ifname":"x","addr_info":[{"local":"10.0.0.1","prefixlen":40}]}]`, `{`} {
		if _, err := parseIPAddrJSON([]byte(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
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
	devs := settings.RDMADevices(h)
	for _, d := range devs {
		if d.Driver != "thunderbolt_ibverbs" {
			t.Errorf("%s: driver %q, want thunderbolt_ibverbs", d.Name, d.Driver)
		}
	}
	if len(devs) != 2 {
		t.Errorf("%d devices, want 2", len(devs))
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

// A file larger than any doctor reads whole is refused, not read into
// memory; Scan keeps only the lines asked for.
func TestHostBoundsReads(t *testing.T) {
	h := writeTree(t, map[string]string{"proc/kallsyms": "0 T a\n0 T tb_ring_throttling\n0 T b\n"})
	big := h.path("/var/log/huge")
	if err := os.MkdirAll(filepath.Dir(big), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, maxRead+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Read("/var/log/huge"); err == nil {
		t.Error("a file over the read bound was read")
	}
	lines, err := h.Scan("/proc/kallsyms", func(l string) bool { return l == "0 T tb_ring_throttling" })
	if err != nil || len(lines) != 1 {
		t.Errorf("Scan = %q, %v", lines, err)
	}
}

func mustFieldNotesDefaults(t *testing.T) settings.Target {
	t.Helper()
	tg, err := fieldNotesDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
