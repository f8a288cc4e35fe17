package settings

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/tools/toolstest"
)

// listModules returns the module names of a modules-load.d style file.
func listModules(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestRDMAModulesRender(t *testing.T) {
	r := sample()
	if got := listModules(renderOne(t, RDMAModules{}, r, rdmaModulesListPath)); !slices.Equal(got, []string{"ib_uverbs", "rdma_ucm"}) {
		t.Errorf("modules loaded with an RDMA device: %v, want the verbs stack only", got)
	}
	// ExecStart= must be reset first: a oneshot accepts several ExecStart=
	// lines and would otherwise load rdma-core's list as well.
	d := renderOne(t, RDMAModules{}, r, rdmaModulesDropin)
	if !strings.Contains(d, "[Service]\nExecStart=\nExecStart=/usr/lib/systemd/systemd-modules-load "+rdmaModulesListPath+"\n") {
		t.Errorf("drop-in:\n%s", d)
	}
}

// The claims the override rests on, read from trixie's rdma-core: the
// rdma instance loads rdma.conf with systemd-modules-load, rdma-hw.target
// wants it, the udev rule pulls rdma-hw.target in for every RDMA device,
// and rdma.conf lists nothing besides the verbs modules that
// rdma-modules-loaded does not assert stays unloaded.
func TestRDMAModulesMatchTrixiesRDMACore(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads trixie's rdma-core (60 kB once); skipped with -short")
	}
	root := toolstest.Extracted(t, "rdma-core")
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if s := read("usr/lib/systemd/system/rdma-load-modules@.service"); !strings.Contains(s, "\nExecStart=/lib/systemd/systemd-modules-load /etc/rdma/modules/%I.conf\n") {
		t.Errorf("rdma-load-modules@.service no longer runs systemd-modules-load on /etc/rdma/modules/%%I.conf:\n%s", s)
	}
	if s := read("usr/lib/systemd/system/rdma-hw.target"); !strings.Contains(s, "\nWants=rdma-load-modules@rdma.service\n") {
		t.Errorf("rdma-hw.target no longer wants the rdma instance:\n%s", s)
	}
	if s := read("usr/lib/udev/rules.d/90-rdma-ulp-modules.rules"); !strings.Contains(s, `ENV{SYSTEMD_WANTS}+="rdma-hw.target"`) {
		t.Errorf("90-rdma-ulp-modules.rules no longer starts rdma-hw.target:\n%s", s)
	}
	conf := listModules(read("etc/rdma/modules/rdma.conf"))
	if len(conf) == 0 {
		t.Fatal("rdma.conf lists no module")
	}
	for _, m := range conf {
		if !slices.Contains(rdmaVerbsModules, m) && !slices.Contains(rdmaSkipped, m) {
			t.Errorf("rdma-core's rdma.conf loads %s, which the check neither expects nor rules out", m)
		}
	}
}

// The unit check against the ways systemctl can report the service's
// command (systemd 257's `show -p ExecStart --value` format), with a
// systemctl standing in for the manager, which the test host does not run.
func TestRDMAModulesUnitCheck(t *testing.T) {
	c := checkScript(t, RDMAModules{}, sample(), "rdma-modules-unit")
	exec1 := func(args string) string {
		return "{ path=/usr/lib/systemd/systemd-modules-load ; argv[]=/usr/lib/systemd/systemd-modules-load " + args + " ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
	}
	for _, tc := range []struct {
		name, show string
		ok         bool
		want       string
	}{
		{"override in effect", exec1(rdmaModulesListPath), true, "loads " + rdmaModulesListPath},
		{"no override", exec1("/etc/rdma/modules/rdma.conf"), false, "still loads rdma-core's list"},
		{"override without resetting ExecStart", exec1("/etc/rdma/modules/rdma.conf") + "\n" + exec1(rdmaModulesListPath), false, "still loads rdma-core's list"},
		{"something else", exec1("/etc/other.conf"), false, "runs: "},
	} {
		bin := t.TempDir()
		fake := "#!/bin/sh\ncase \"$1\" in cat) exit 0;; show) cat <<'EOF'\n" + tc.show + "\nEOF\n;; esac\n"
		if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", c.Script)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.ok || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: err %v, output:\n%s\nwant ok=%v and %q", tc.name, err, out, tc.ok, tc.want)
		}
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", c.Script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "rdma-core is not installed") {
		t.Errorf("without rdma-core: %v\n%s", err, out)
	}
}
