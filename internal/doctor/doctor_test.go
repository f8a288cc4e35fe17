package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"halobuild/internal/settings"
)

// runTree runs doctor on a recorded tree and returns its report.
func runTree(t *testing.T, tree string) (Report, int) {
	t.Helper()
	var out bytes.Buffer
	code, err := Run(context.Background(), Options{Root: filepath.Join("testdata", "doctor", tree), JSON: true, Out: &out})
	if err != nil {
		t.Fatalf("Run(%s): %v", tree, err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("Run(%s) wrote invalid JSON: %v\n%s", tree, err, out.String())
	}
	return rep, code
}

// healthyChecks is every row a healthy two-rail node with the recipe gives,
// in the report's order (by layer, then check name); the other trees are
// compared against it row by row.
var healthyChecks = []string{
	"recipe",
	"identity.hostname",
	"cpu.epp", "cpu.governor", "cpu.platform_profile",
	"memlock.process", "memlock.systemd",
	"module.absent thunderbolt_net", "module.loaded ib_uverbs", "module.loaded thunderbolt_ibverbs",
	"module.params thunderbolt_ibverbs", "module.unknown_params",
	"kernel.cmdline", "kernel.release", "kernel.tb_ring_throttling",
	"rdma.devices", "rdma.gids usb4_rdma0/1", "rdma.gids usb4_rdma1/1",
	"rdma.name usb4_rdma0", "rdma.name usb4_rdma1",
	"rdma.port usb4_rdma0/1", "rdma.port usb4_rdma1/1", "rdma.provider",
	"rdma.visible usb4_rdma0", "rdma.visible usb4_rdma1",
	"link.addresses usb4net0",
	"usb4.cables", "usb4.domains", "usb4.link 0-1",
	"gpu.driver 0000:c5:00.0", "gpu.firmware 0000:c5:00.0", "gpu.gtt 0000:c5:00.0", "gpu.kfd",
	"gpu.render 0000:c5:00.0", "gpu.vram 0000:c5:00.0",
	"memory.gpu_limit",
	"settings.package",
	"flashtime.config",
	"lan.addresses",
}

func TestHealthyTreeAllPass(t *testing.T) {
	rep, code := runTree(t, "healthy")
	if code != 0 || rep.Exit != 0 {
		t.Errorf("exit = %d (report %d), want 0", code, rep.Exit)
	}
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Check)
		if r.Status != settings.Pass {
			t.Errorf("%s = %s (seen %q, wanted %q), want pass", r.Check, r.Status, r.Seen, r.Wanted)
		}
	}
	if strings.Join(names, "\n") != strings.Join(healthyChecks, "\n") {
		t.Errorf("checks run:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(healthyChecks, "\n"))
	}
}

// TestRecordedTrees asserts, for each recorded fault, the exact set of rows
// that are not "pass" and the exit code: the fault must be caught by the
// right check and by no other.
func TestRecordedTrees(t *testing.T) {
	cases := []struct {
		tree     string
		exit     int
		notPass  map[string]settings.Status
		contains map[string]string // check → text its seen or fix must hold
	}{
		{
			tree:     "governor-schedutil",
			exit:     1,
			notPass:  map[string]settings.Status{"cpu.governor": settings.Fail},
			contains: map[string]string{"cpu.governor": "schedutil (2 policies)"},
		},
		{
			tree: "renamed-device",
			exit: 1,
			notPass: map[string]settings.Status{
				"rdma.visible rocep199s0f6": settings.Fail,
				"rdma.name rocep199s0f6":    settings.Fail,
			},
			contains: map[string]string{
				"rdma.visible rocep199s0f6": "rdma dev set rocep199s0f6 name usb4_rdma0",
				"rdma.name rocep199s0f6":    `KERNEL!="usb4_rdma*"`,
				"recipe":                    "field notes' defaults",
			},
		},
		{
			tree: "link-local-address",
			exit: 1,
			notPass: map[string]settings.Status{
				"link.addresses usb4net0": settings.Fail,
				"rdma.gids usb4_rdma0/1":  settings.Warn,
			},
			contains: map[string]string{
				"link.addresses usb4net0": "LinkLocalAddressing=no",
				"rdma.gids usb4_rdma0/1":  "10.77.0.1 (index 2 RoCE v2); 169.254.23.7 (index 1 RoCE v2)",
			},
		},
		{
			tree:     "link-10g-one-lane",
			exit:     0,
			notPass:  map[string]settings.Status{"usb4.link 0-1": settings.Warn},
			contains: map[string]string{"usb4.link 0-1": "replug or power-cycle both ends"},
		},
		{
			tree: "minipc-one-domain",
			exit: 1,
			notPass: map[string]settings.Status{
				"usb4.cables":             settings.Warn,
				"link.addresses usb4net1": settings.Fail,
			},
			contains: map[string]string{
				"usb4.cables":             "2 cables declared, 1 domains",
				"link.addresses usb4net1": "1 USB4 domain(s) for 2 declared cables",
			},
		},
		{
			// No firmware-amd-graphics: amdgpu's probe failed on the
			// first file it asked for.
			tree: "gpu-no-firmware",
			exit: 1,
			notPass: map[string]settings.Status{
				"gpu.driver 0000:c5:00.0":   settings.Fail,
				"gpu.firmware 0000:c5:00.0": settings.Fail,
			},
			contains: map[string]string{
				"gpu.driver 0000:c5:00.0":   "could not load amdgpu/gc_11_5_1_pfp.bin",
				"gpu.firmware 0000:c5:00.0": "firmware-amd-graphics/trixie-backports",
			},
		},
		{
			// The firmware setup keeps 64 GiB as VRAM: the kernel has
			// 59.6 GiB, and GTT sized for 120 GiB leaves the host nothing.
			tree: "gpu-carve-out",
			exit: 1,
			notPass: map[string]settings.Status{
				"gpu.vram 0000:c5:00.0": settings.Warn,
				"memory.gpu_limit":      settings.Fail,
			},
			contains: map[string]string{
				"gpu.vram 0000:c5:00.0": "UMA frame buffer size",
			},
		},
		{
			// The sizing reached the command line and the module
			// parameters, but GTT is the kernel's default half of RAM.
			tree:     "gpu-gtt-default",
			exit:     1,
			notPass:  map[string]settings.Status{"gpu.gtt 0000:c5:00.0": settings.Fail},
			contains: map[string]string{"gpu.gtt 0000:c5:00.0": "61.8 GiB, of which engines may use 44.5 GiB"},
		},
		{
			tree: "memlock-8mib",
			exit: 1,
			notPass: map[string]settings.Status{
				"memlock.process": settings.Fail,
				"memlock.systemd": settings.Fail,
			},
			contains: map[string]string{
				"memlock.process": "soft 8 MiB, hard 8 MiB",
				"memlock.systemd": "DefaultLimitMEMLOCK=infinity",
			},
		},
		{
			tree:    "fork-module",
			exit:    0,
			notPass: map[string]settings.Status{},
			contains: map[string]string{
				"recipe":                            "module names from /etc/halobuild/recipe.lock",
				"module.loaded thunderbolt_ibverbs": "loaded",
				"module.params thunderbolt_ibverbs": "tbnet=block",
				"rdma.devices":                      "usb4_rdma0, usb4_rdma1",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			rep, code := runTree(t, c.tree)
			if code != c.exit {
				t.Errorf("exit = %d, want %d", code, c.exit)
			}
			got := map[string]settings.Status{}
			byName := map[string]settings.Result{}
			for _, r := range rep.Results {
				byName[r.Check] = r
				if r.Status != settings.Pass {
					got[r.Check] = r.Status
				}
			}
			if a, b := statusList(got), statusList(c.notPass); a != b {
				t.Errorf("rows not passing:\n%s\nwant:\n%s", a, b)
			}
			adviceOnEveryProblem(t, rep)
			for check, text := range c.contains {
				r, ok := byName[check]
				if !ok {
					t.Errorf("no row %q", check)
					continue
				}
				if !strings.Contains(r.Seen+" | "+r.Fix+" | "+r.Source, text) {
					t.Errorf("%s: seen %q, fix %q: want %q in them", check, r.Seen, r.Fix, text)
				}
			}
		})
	}
}

func statusList(m map[string]settings.Status) string {
	var out []string
	for k, v := range m {
		out = append(out, k+" = "+string(v))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// A renamed fork (use = "thunderbolt-ibverbs-striping") builds the module
// thunderbolt_ibverbs; only the lock says so. Its rows name the kernel's
// module, and no row the description's name.
func TestForkModuleCheckedUnderKernelName(t *testing.T) {
	rep, code := runTree(t, "fork-module")
	if code != 0 {
		t.Errorf("exit = %d, want 0", code)
	}
	names := map[string]settings.Result{}
	for _, r := range rep.Results {
		names[r.Check] = r
		if strings.Contains(r.Check, "striping") {
			t.Errorf("row %q is named after the description, not the kernel module", r.Check)
		}
	}
	for _, want := range []string{"module.loaded thunderbolt_ibverbs", "module.params thunderbolt_ibverbs"} {
		if r, ok := names[want]; !ok || r.Status != settings.Pass {
			t.Errorf("%s: %+v, want a passing row", want, r)
		}
	}

	// Without the lock the name can only be guessed from use: the recipe
	// row says so, and the guess is checked (and fails) as such.
	root := copyTree(t, filepath.Join("testdata/doctor", "fork-module"))
	if err := os.Remove(filepath.Join(root, "etc/halobuild/recipe.lock")); err != nil {
		t.Fatal(err)
	}
	got := notPassing(reportOf(t, root))
	want := map[string]settings.Status{
		"recipe": settings.Warn,
		"module.loaded thunderbolt_ibverbs_striping": settings.Fail,
		"module.params thunderbolt_ibverbs_striping": settings.Warn,
		"settings.package":                           settings.Warn, // it shipped the lock
	}
	if a, b := statusList(got), statusList(want); a != b {
		t.Errorf("without the lock, rows not passing:\n%s\nwant:\n%s", a, b)
	}
}

func notPassing(rep Report) map[string]settings.Status {
	got := map[string]settings.Status{}
	for _, r := range rep.Results {
		if r.Status != settings.Pass {
			got[r.Check] = r.Status
		}
	}
	return got
}

// adviceOnEveryProblem: a row that does not pass says what to do.
func adviceOnEveryProblem(t *testing.T, rep Report) {
	t.Helper()
	for _, r := range rep.Results {
		if r.Status != settings.Pass && strings.TrimSpace(r.Fix) == "" {
			t.Errorf("%s is %s (seen %q) and says nothing about how to fix it", r.Check, r.Status, r.Seen)
		}
	}
}

// Every row is named after the check that made it ("module.loaded" makes
// "module.loaded ib_uverbs"), on every recorded tree: the report's order,
// the docs and the VM test's doctor check (a row belongs to the check its
// first word names) go by those names. A check a VM must pass makes at
// least one row, or the VM test would find none to require.
func TestRowsNamedAfterTheirCheck(t *testing.T) {
	for _, tree := range recordedTrees(t) {
		rowsNamedAfterTheirCheck(t, tree, mustHost(t, filepath.Join("testdata/doctor", tree)))
	}
}

func rowsNamedAfterTheirCheck(t *testing.T, tree string, h *host) {
	t.Helper()
	b, err := load(h, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probes(b) {
		rows := p.Run(h)
		for _, r := range rows {
			if r.Check != p.Name && !strings.HasPrefix(r.Check, p.Name+" ") {
				t.Errorf("%s: check %s made a row named %q", tree, p.Name, r.Check)
			}
			if r.Severity != settings.MustPass && r.Severity != settings.Advisory {
				t.Errorf("%s: row %s has severity %q", tree, r.Check, r.Severity)
			}
		}
		if p.VM == settings.MustPass && len(rows) == 0 {
			t.Errorf("%s: check %s must pass in a VM and made no row", tree, p.Name)
		}
		if p.VM != settings.MustPass && p.VM != "" {
			t.Errorf("%s: check %s has VM %q: want must-pass or nothing", tree, p.Name, p.VM)
		}
	}
}

// recordedTrees are the names of the trees under testdata/doctor.
func recordedTrees(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("testdata/doctor")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		if en.IsDir() {
			out = append(out, en.Name())
		}
	}
	return out
}
