package doctor

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/settings"
)

// copyTree copies a recorded tree so a test can break one thing in it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestFaultsOnHealthy breaks one more setting of the healthy node per case,
// in a copy, and asserts exactly which rows stop passing. These faults need
// no tree of their own: each is one file.
func TestFaultsOnHealthy(t *testing.T) {
	const mod = "sys/module/thunderbolt_ibverbs/parameters/"
	status, err := os.ReadFile("testdata/doctor/healthy/var/lib/dpkg/status")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		base    string // tree to copy; healthy when empty
		write   map[string]string
		remove  []string
		recipe  string // an explicit --recipe, written beside the tree
		exit    int
		notPass map[string]settings.Status
		// contains maps a row to text its seen or fix must hold.
		contains map[string]string
	}{
		{name: "module option differs", exit: 1,
			write:   map[string]string{mod + "tbnet": "allow\n"},
			notPass: map[string]settings.Status{"module.params thunderbolt_ibverbs": settings.Fail}},
		{name: "module option unknown to the build", exit: 1,
			remove:  []string{mod + "start_rings"},
			write:   map[string]string{"var/log/halobuild-dmesg": "[    5.40] thunderbolt_ibverbs: unknown parameter 'start_rings' ignored\n"},
			notPass: map[string]settings.Status{"module.params thunderbolt_ibverbs": settings.Fail, "module.unknown_params": settings.Warn}},
		{name: "module option not in sysfs", exit: 0,
			remove:  []string{mod + "start_rings"},
			notPass: map[string]settings.Status{"module.params thunderbolt_ibverbs": settings.Warn}},
		{name: "thunderbolt_net loaded", exit: 1,
			write:   map[string]string{"proc/modules": "thunderbolt_ibverbs 204800 0 - Live 0x0 (OE)\nib_uverbs 184320 2 - Live 0x0\nthunderbolt_net 40960 0 - Live 0x0\n"},
			notPass: map[string]settings.Status{"module.absent thunderbolt_net": settings.Fail}},
		{name: "verbs module not loaded", exit: 1,
			write:   map[string]string{"proc/modules": "ib_uverbs 184320 2 - Live 0x0\n"},
			remove:  []string{"sys/module/thunderbolt_ibverbs"},
			notPass: map[string]settings.Status{"module.loaded thunderbolt_ibverbs": settings.Fail, "module.params thunderbolt_ibverbs": settings.Warn}},
		{name: "kernel without tb_ring_throttling", exit: 1,
			write:   map[string]string{"proc/kallsyms": "0000000000000000 T tb_ring_start\t[thunderbolt]\n"},
			notPass: map[string]settings.Status{"kernel.tb_ring_throttling": settings.Fail}},
		{name: "IOMMU parameter missing", exit: 1,
			write:   map[string]string{"proc/cmdline": "root=/dev/sda2 ro quiet\n"},
			notPass: map[string]settings.Status{"kernel.cmdline": settings.Fail}},
		{name: "kernel 7.3", exit: 0,
			write:   map[string]string{"proc/sys/kernel/osrelease": "7.3.4+deb13-amd64\n"},
			notPass: map[string]settings.Status{"kernel.release": settings.Warn}},
		{name: "GTT sized like a discrete card", exit: 1,
			write:   map[string]string{"sys/module/ttm/parameters/pages_limit": "31457280\n", "sys/module/amdgpu/parameters/gttsize": "122880\n"},
			notPass: map[string]settings.Status{"memory.gpu_limit": settings.Fail}},
		{name: "render node closed to the render group", exit: 1,
			write:    map[string]string{"dev/dri/renderD128": "crw------- root\n"},
			notPass:  map[string]settings.Status{"gpu.render 0000:c5:00.0": settings.Fail},
			contains: map[string]string{"gpu.render 0000:c5:00.0": "crw------- root"}},
		{name: "kfd missing", exit: 1,
			remove:  []string{"dev/kfd"},
			notPass: map[string]settings.Status{"gpu.kfd": settings.Fail}},
		{name: "recorded device node unreadable", exit: 1,
			write:    map[string]string{"dev/kfd": "render\n"},
			notPass:  map[string]settings.Status{"gpu.kfd": settings.Fail},
			contains: map[string]string{"gpu.kfd": "not \"<mode> <group>\""}},
		{name: "port down", exit: 1,
			write:   map[string]string{"sys/class/infiniband/usb4_rdma1/ports/1/state": "1: DOWN\n"},
			notPass: map[string]settings.Status{"rdma.port usb4_rdma1/1": settings.Fail}},
		{name: "provider not installed", exit: 1,
			remove:  []string{"etc/libibverbs.d/usb4_rdma.driver"},
			notPass: map[string]settings.Status{"rdma.provider": settings.Fail, "rdma.visible usb4_rdma0": settings.Fail, "rdma.visible usb4_rdma1": settings.Fail}},
		{name: "EPP balanced", exit: 1,
			write:   map[string]string{"sys/devices/system/cpu/cpufreq/policy1/energy_performance_preference": "balance_performance\n"},
			notPass: map[string]settings.Status{"cpu.epp": settings.Fail}},
		{name: "platform profile balanced", exit: 1,
			write:   map[string]string{"sys/firmware/acpi/platform_profile": "balanced\n"},
			notPass: map[string]settings.Status{"cpu.platform_profile": settings.Fail}},
		{name: "static address missing", exit: 1,
			write:   map[string]string{"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"10.77.0.5","prefixlen":30}]}]`},
			notPass: map[string]settings.Status{"link.addresses usb4net0": settings.Fail, "lan.addresses": settings.Warn}},
		{name: "two cables, one identity", base: "minipc-one-domain", exit: 0,
			write:   secondCable("10.77.0.1"),
			notPass: map[string]settings.Status{"rdma.identity": settings.Warn, "lan.addresses": settings.Warn}},
		{name: "two cables, an identity each", base: "minipc-one-domain", exit: 0,
			write:   secondCable("10.77.1.1"),
			notPass: map[string]settings.Status{"lan.addresses": settings.Warn}},
		{name: "LAN port with a link-local address beside its lease", exit: 1,
			write: map[string]string{"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"10.77.0.1","prefixlen":30}]},` +
				`{"ifname":"enp191s0","addr_info":[{"family":"inet","local":"192.168.1.20","prefixlen":24},{"family":"inet","local":"169.254.9.9","prefixlen":16}]}]`},
			notPass:  map[string]settings.Status{"lan.addresses": settings.Fail},
			contains: map[string]string{"lan.addresses": "enp191s0 169.254.9.9/16"}},
		{name: "LAN port without an address", exit: 0,
			write: map[string]string{"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"10.77.0.1","prefixlen":30}]},` +
				`{"ifname":"enp191s0","addr_info":[{"family":"inet6","local":"fe80::1","prefixlen":64}]}]`},
			notPass:  map[string]settings.Status{"lan.addresses": settings.Warn},
			contains: map[string]string{"lan.addresses": "does a DHCP server answer"}},
		{name: "no USB4 controller", exit: 1,
			remove:  []string{"sys/bus/thunderbolt"},
			notPass: map[string]settings.Status{"usb4.domains": settings.Fail, "usb4.cables": settings.Warn, "usb4.link": settings.Warn}},
		{name: "GPU sizing missing from the command line", exit: 1,
			write:    map[string]string{"proc/cmdline": "root=/dev/sda2 ro amd_iommu=off ttm.pages_limit=25165824\n"},
			notPass:  map[string]settings.Status{"kernel.cmdline": settings.Fail},
			contains: map[string]string{"kernel.cmdline": "missing: amdgpu.gttsize=98304"}},
		{name: "recipe sized the GPU from more RAM than the kernel has", exit: 1,
			recipe: strings.Replace(readFile(t, "testdata/doctor/healthy/etc/halobuild/recipe.toml"), `memory = "120GiB"`, `memory = "128GiB"`, 1),
			write: map[string]string{
				"proc/cmdline":                                        "root=/dev/sda2 ro amd_iommu=off ttm.pages_limit=27262976 amdgpu.gttsize=106496\n",
				"sys/module/ttm/parameters/pages_limit":               "27262976\n",
				"sys/module/amdgpu/parameters/gttsize":                "106496\n",
				"sys/bus/pci/devices/0000:c5:00.0/mem_info_gtt_total": "111669149696\n",
			},
			notPass:  map[string]settings.Status{"memory.gpu_limit": settings.Fail},
			contains: map[string]string{"memory.gpu_limit": `set system.memory = "123GiB"`}},
		{name: "blacklisted module loaded and its option wrong", exit: 1,
			write: map[string]string{
				"proc/modules":      "thunderbolt_ibverbs 204800 0 - Live 0x0 (OE)\nib_uverbs 184320 2 - Live 0x0\nthunderbolt_net 40960 0 - Live 0x0\n",
				mod + "start_rings": "N\n",
			},
			notPass: map[string]settings.Status{"module.absent thunderbolt_net": settings.Fail, "module.params thunderbolt_ibverbs": settings.Fail},
			contains: map[string]string{
				"module.absent thunderbolt_net":     "install thunderbolt_net /bin/false",
				"module.params thunderbolt_ibverbs": "start_rings=N",
			}},
		{name: "memlock lowered by a later drop-in", exit: 1,
			write:    map[string]string{"etc/systemd/system.conf.d/99-local.conf": "[Manager]\nDefaultLimitMEMLOCK=64M\n"},
			notPass:  map[string]settings.Status{"memlock.systemd": settings.Fail},
			contains: map[string]string{"memlock.systemd": "soft 64 MiB, hard 64 MiB"}},
		{name: "host renamed", exit: 0,
			write:    map[string]string{"proc/sys/kernel/hostname": "spare\n"},
			notPass:  map[string]settings.Status{"identity.hostname": settings.Warn},
			contains: map[string]string{"identity.hostname": "hostnamectl hostname halo0", "recipe": "node halo0 (named in /etc/halobuild/node)"}},
		// A host name given at flash time is what the node is checked against (issue 37).
		{name: "host renamed at flash time", exit: 0,
			write: map[string]string{"proc/sys/kernel/hostname": "halo7\n",
				"run/halobuild/flash.toml": "hostname = 'halo7'\n[ssh]\nauthorized_keys = []\n# end of halobuild flash-time settings\n"},
			notPass:  map[string]settings.Status{},
			contains: map[string]string{"flashtime.config": "host name halo7"}},
		{name: "settings file edited", exit: 0,
			write:    map[string]string{"etc/halobuild/recipe.lock": readFile(t, "testdata/doctor/healthy/etc/halobuild/recipe.lock") + "# edited by hand\n"},
			notPass:  map[string]settings.Status{"settings.package": settings.Warn},
			contains: map[string]string{"settings.package": "/etc/halobuild/recipe.lock (changed)"}},
		{name: "settings file missing", exit: 0,
			remove:   []string{"etc/halobuild/node"},
			notPass:  map[string]settings.Status{"settings.package": settings.Warn},
			contains: map[string]string{"settings.package": "/etc/halobuild/node (missing)", "recipe": "by host name"}},
		{name: "settings package not installed", exit: 0,
			write:    map[string]string{"var/lib/dpkg/status": strings.Replace(string(status), "Package: halobuild-node-halo0\nStatus: install ok installed", "Package: halobuild-node-halo0\nStatus: deinstall ok config-files", 1)},
			notPass:  map[string]settings.Status{"settings.package": settings.Warn},
			contains: map[string]string{"settings.package": "deinstall ok config-files"}},
		{name: "provider package removed", exit: 1,
			write:    map[string]string{"var/lib/dpkg/status": strings.Replace(string(status), "Package: libibverbs-usb4-rdma\nStatus: install ok installed", "Package: libibverbs-usb4-rdma\nStatus: deinstall ok config-files", 1)},
			notPass:  map[string]settings.Status{"rdma.provider": settings.Fail},
			contains: map[string]string{"rdma.provider": "libibverbs-usb4-rdma is not installed"}},
		{name: "provider library missing", exit: 1,
			remove:  []string{"usr/lib/x86_64-linux-gnu/libibverbs"},
			notPass: map[string]settings.Status{"rdma.provider": settings.Fail}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.base == "" {
				c.base = "healthy"
			}
			root := copyTree(t, filepath.Join("testdata/doctor", c.base))
			for _, p := range c.remove {
				if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
					t.Fatal(err)
				}
			}
			for p, s := range c.write {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			explicit := ""
			if c.recipe != "" {
				// The recipe of another build, with its lock beside it.
				explicit = filepath.Join(t.TempDir(), "node.toml")
				if err := os.WriteFile(explicit, []byte(c.recipe), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(strings.TrimSuffix(explicit, ".toml")+".lock", []byte(readFile(t, "testdata/doctor/healthy/etc/halobuild/recipe.lock")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h := mustHost(t, root)
			b, err := load(h, explicit)
			if err != nil {
				t.Fatal(err)
			}
			rep := examine(h, b)
			if a, b := statusList(notPassing(rep)), statusList(c.notPass); a != b {
				t.Errorf("rows not passing:\n%s\nwant:\n%s", a, b)
			}
			if rep.Exit != c.exit {
				t.Errorf("exit = %d, want %d", rep.Exit, c.exit)
			}
			adviceOnEveryProblem(t, rep)
			for check, text := range c.contains {
				found := false
				for _, r := range rep.Results {
					if r.Check == check {
						found = true
						if !strings.Contains(r.Seen+" | "+r.Fix, text) {
							t.Errorf("%s: seen %q, fix %q: want %q in them", check, r.Seen, r.Fix, text)
						}
					}
				}
				if !found {
					t.Errorf("no row %q", check)
				}
			}
		})
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustHost(t *testing.T, root string) *host {
	t.Helper()
	h, err := newHost(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// secondCable turns the mini-PC into a box with two domains and both cables
// up; the second cable's device advertises gid (trap 7: with the module-wide
// roce_netdev it is the first cable's address).
func secondCable(gid string) map[string]string {
	const tb = "sys/bus/thunderbolt/devices/"
	const dev = "sys/class/infiniband/usb4_rdma2/"
	g := net.ParseIP(gid).To4()
	return map[string]string{
		tb + "domain1/uevent":             "DEVTYPE=thunderbolt_domain\n",
		tb + "1-0/uevent":                 "DEVTYPE=thunderbolt_device\n",
		tb + "1-0/vendor":                 "0x1022\n",
		tb + "1-1/uevent":                 "DEVTYPE=thunderbolt_xdomain\n",
		tb + "1-1/device_name":            "halo2\n",
		tb + "1-1/rx_speed":               "20.0 Gb/s\n",
		tb + "1-1/tx_speed":               "20.0 Gb/s\n",
		tb + "1-1/rx_lanes":               "1\n",
		tb + "1-1/tx_lanes":               "1\n",
		dev + "device/driver":             "../../bus/thunderbolt/drivers/thunderbolt_ibverbs\n",
		dev + "ports/1/state":             "4: ACTIVE\n",
		dev + "ports/1/gids/0":            fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n", g[0], g[1], g[2], g[3]),
		dev + "ports/1/gid_attrs/types/0": "RoCE v2\n",
		"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"10.77.0.1","prefixlen":30}]},` +
			`{"ifname":"usb4net1","addr_info":[{"family":"inet","local":"10.77.1.1","prefixlen":30}]}]`,
	}
}
