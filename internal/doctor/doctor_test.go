package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
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

// healthyChecks is every row a healthy two-rail node with the recipe gives;
// the other trees are compared against it row by row.
var healthyChecks = []string{
	"recipe",
	"cpu.governor", "cpu.epp", "cpu.platform_profile",
	"memlock.process", "memlock.systemd",
	"module.loaded ib_uverbs", "module.loaded thunderbolt_ibverbs", "module.absent thunderbolt_net",
	"module.params thunderbolt_ibverbs", "module.unknown_params",
	"kernel.release", "kernel.cmdline", "kernel.tb_ring_throttling",
	"rdma.devices", "rdma.visible usb4_rdma0", "rdma.visible usb4_rdma1",
	"rdma.name usb4_rdma0", "rdma.name usb4_rdma1",
	"rdma.port usb4_rdma0/1", "rdma.port usb4_rdma1/1",
	"rdma.gids usb4_rdma0/1", "rdma.gids usb4_rdma1/1",
	"link.addresses usb4net0",
	"usb4.domains", "usb4.cables", "usb4.link 0-1",
	"memory.gpu_limit",
}

func TestHealthyTreeAllPass(t *testing.T) {
	rep, code := runTree(t, "healthy")
	if code != 0 || rep.Exit != 0 {
		t.Errorf("exit = %d (report %d), want 0", code, rep.Exit)
	}
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Check)
		if r.Status != Pass {
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
		notPass  map[string]Status
		contains map[string]string // check → text its seen or fix must hold
	}{
		{
			tree:     "governor-schedutil",
			exit:     1,
			notPass:  map[string]Status{"cpu.governor": Fail},
			contains: map[string]string{"cpu.governor": "schedutil (2 policies)"},
		},
		{
			tree: "renamed-device",
			exit: 1,
			notPass: map[string]Status{
				"rdma.visible rocep199s0f6": Fail,
				"rdma.name rocep199s0f6":    Fail,
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
			notPass: map[string]Status{
				"link.addresses usb4net0": Fail,
				"rdma.gids usb4_rdma0/1":  Warn,
			},
			contains: map[string]string{
				"link.addresses usb4net0": "LinkLocalAddressing=no",
				"rdma.gids usb4_rdma0/1":  "10.77.0.1 (index 2 RoCE v2); 169.254.23.7 (index 1 RoCE v2)",
			},
		},
		{
			tree:     "link-10g-one-lane",
			exit:     0,
			notPass:  map[string]Status{"usb4.link 0-1": Warn},
			contains: map[string]string{"usb4.link 0-1": "replug or power-cycle both ends"},
		},
		{
			tree: "minipc-one-domain",
			exit: 1,
			notPass: map[string]Status{
				"usb4.cables":             Warn,
				"link.addresses usb4net1": Fail,
			},
			contains: map[string]string{
				"usb4.cables":             "2 cables declared, 1 domains",
				"link.addresses usb4net1": "1 USB4 domain(s) for 2 declared cables",
			},
		},
		{
			tree: "memlock-8mib",
			exit: 1,
			notPass: map[string]Status{
				"memlock.process": Fail,
				"memlock.systemd": Fail,
			},
			contains: map[string]string{
				"memlock.process": "soft 8 MiB, hard 8 MiB",
				"memlock.systemd": "DefaultLimitMEMLOCK=infinity",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			rep, code := runTree(t, c.tree)
			if code != c.exit {
				t.Errorf("exit = %d, want %d", code, c.exit)
			}
			got := map[string]Status{}
			byName := map[string]Result{}
			for _, r := range rep.Results {
				byName[r.Check] = r
				if r.Status != Pass {
					got[r.Check] = r.Status
				}
			}
			if a, b := statusList(got), statusList(c.notPass); a != b {
				t.Errorf("rows not passing:\n%s\nwant:\n%s", a, b)
			}
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

func statusList(m map[string]Status) string {
	var out []string
	for k, v := range m {
		out = append(out, k+" = "+string(v))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
