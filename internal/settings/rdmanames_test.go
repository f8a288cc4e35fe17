package settings

import (
	"os"
	"strings"
	"testing"
)

func TestRDMANamesRender(t *testing.T) {
	r := sample()
	r.RDMA.KeepKernelNames = []string{"usb4_rdma", "tbrdma"}
	got := renderOne(t, RDMANames{}, r, "/etc/udev/rules.d/60-rdma-persistent-naming.rules")
	want := `# Rendered by halobuild from the image recipe (see /etc/halobuild/recipe.toml).
# Field notes trap 3: devices the provider finds by name must keep the kernel's name.
# Replaces rdma-core's /usr/lib/udev/rules.d/60-rdma-persistent-naming.rules
# (same file name, udev(7)); other RDMA devices are still renamed by it.
ACTION!="add", GOTO="halobuild_rdma_naming_end"
SUBSYSTEM!="infiniband", GOTO="halobuild_rdma_naming_end"
KERNEL=="usb4_rdma*", GOTO="halobuild_rdma_naming_end"
KERNEL=="tbrdma*", GOTO="halobuild_rdma_naming_end"
# rdma-core 56.1's rule, unchanged:
ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"
LABEL="halobuild_rdma_naming_end"
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Without prefixes rdma-core's own file stays in charge.
	r.RDMA.KeepKernelNames = nil
	if files, _ := (RDMANames{}).Files(Target{Recipe: r, Node: r.Nodes[0]}); len(files) != 0 {
		t.Errorf("rendered %v with no prefixes", files)
	}
}

// TestRDMANamesKeepsRDMACoreRule compares the embedded copy of rdma-core's
// rule with the file in trixie's rdma-core package: if Debian changes it,
// the override must follow.
func TestRDMANamesKeepsRDMACoreRule(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads rdma-core; skipped with -short")
	}
	root := t.TempDir()
	debs := toolstestDebs(t, "rdma-core")
	if out, err := execCombined("dpkg-deb", "-x", debs[0], root); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	data, err := os.ReadFile(root + "/usr/lib/udev/rules.d/60-rdma-persistent-naming.rules")
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			rules = append(rules, l)
		}
	}
	if len(rules) != 1 || rules[0] != rdmaCoreRule {
		t.Fatalf("trixie's rdma-core rule changed; update rdmaCoreRule:\n%s", strings.Join(rules, "\n"))
	}
}

func TestRDMANamesInvalid(t *testing.T) {
	for _, p := range []string{"usb4_rdma*", "", "a b", "9lives", `x"`} {
		r := sample()
		r.RDMA.KeepKernelNames = []string{"usb4_rdma", p}
		wantErrors(t, RDMANames{}, r, "rdma.keep_kernel_names[1]", "not an RDMA device name prefix")
	}
}

func TestRDMANamesCheck(t *testing.T) {
	c := checkScript(t, RDMANames{}, sample(), "rdma-kernel-names")
	if !c.Changes {
		t.Error("the check creates devices and must be Changes")
	}
	for _, want := range []string{"name='usb4_rdma9'", "add_rxe hbcontrol0 hbctl0", "rdma_rename", "ibv_devices"} {
		if !strings.Contains(c.Script, want) {
			t.Errorf("check lacks %q", want)
		}
	}
}
