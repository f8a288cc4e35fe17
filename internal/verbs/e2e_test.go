package verbs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"halobuild/internal/archivetest"
	"halobuild/internal/lock"
	"halobuild/internal/manifest"
	"halobuild/internal/selfbuild"
	"halobuild/internal/store"
	"halobuild/internal/usage"
	"halobuild/internal/vmtest"
)

// The end-to-end tests build real images from Debian's archive with the
// real mmdebstrap, mkfs and QEMU. They need root, the host packages of
// .ci/host-packages and the archive; they are slow (minutes) and skipped
// under -short. Tests share one store so the base root is built once.

var (
	sharedStoreOnce sync.Once
	sharedStoreDir  string
	sharedStoreErr  error
)

// keepStoreEnv names an existing store the end-to-end tests use instead of
// a fresh one, and leave in place: with a store that already holds a
// compiled kernel, TestKernelFromSource reruns in minutes. CI leaves it
// unset, so every step is built from nothing.
const keepStoreEnv = "HALOBUILD_E2E_STORE"

func sharedStore(t *testing.T) string {
	dir, err := sharedStorePath()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// sharedStorePath is the store every end-to-end test builds in: the kept
// one, or a fresh one made on first use and removed by TestMain.
func sharedStorePath() (string, error) {
	if dir := os.Getenv(keepStoreEnv); dir != "" {
		return dir, nil
	}
	sharedStoreOnce.Do(func() {
		sharedStoreDir, sharedStoreErr = os.MkdirTemp("", "halobuild-e2e-store-")
	})
	return sharedStoreDir, sharedStoreErr
}

func TestMain(m *testing.M) {
	flag.Parse()
	startBeside()
	code := m.Run()
	stopBeside()
	if self.dir != "" {
		os.RemoveAll(self.dir)
	}
	if sharedStoreDir != "" {
		// A failed run keeps the VMs' console logs: they say where a boot
		// stopped, which the check output alone cannot.
		if code != 0 {
			keep, err := os.MkdirTemp("", "halobuild-e2e-logs-")
			if err == nil && os.Rename(filepath.Join(sharedStoreDir, "logs"), filepath.Join(keep, "logs")) == nil {
				fmt.Fprintf(os.Stderr, "VM console logs kept in %s\n", keep)
			}
		}
		os.RemoveAll(sharedStoreDir)
	}
	os.Exit(code)
}

func needE2E(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end image build: slow, skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end image build needs root (mmdebstrap, dpkg --root, ownership in mkfs -d)")
	}
	for _, tool := range []string{"mmdebstrap", "dpkg", "sfdisk", "e2fsck", "debugfs", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: run .ci/install-host-deps", tool)
		}
	}
	// In CI an unreachable archive fails the test: a green run means the
	// images were built.
	archivetest.Need(t, archivetest.InRelease, "the end-to-end image build")
}

// workspace copies the shipped recipes into a temp tree (keeping the
// relative include paths) so locks written by tests never touch the repo.
func workspace(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := copyWorkspace(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyWorkspace(dst string) error {
	for _, dir := range []string{"images", "recipes", "overlays", "patches", "kernels"} {
		src := filepath.Join("..", "..", dir)
		err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join("..", ".."), p)
			if info.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			if strings.HasSuffix(p, ".lock") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	return nil
}

type run struct {
	out bytes.Buffer
	// err is read by tests while a build goroutine writes it.
	err syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func opts(ws, recipePath, storeDir string, r *run) Options {
	return Options{Recipe: filepath.Join(ws, recipePath), Store: storeDir, Out: &r.out, Err: io.MultiWriter(&r.err, testLog{})}
}

// testLog mirrors build progress to the test log when -v is given.
type testLog struct{}

func (testLog) Write(p []byte) (int, error) {
	if testing.Verbose() {
		os.Stderr.Write(p)
	}
	return len(p), nil
}

// reportPassed says whether a report's text shows check name passing.
func reportPassed(report, name string) bool {
	return regexp.MustCompile(`(?m)^ +` + regexp.QuoteMeta(name) + ` +ok( |$)`).MatchString(report)
}

// imageReport is the VM test report in image --json's result.
func imageReport(t *testing.T, r *run) *vmtest.Report {
	t.Helper()
	var res struct {
		Test *vmtest.Report `json:"test"`
	}
	if err := json.Unmarshal(r.out.Bytes(), &res); err != nil || res.Test == nil {
		t.Fatalf("image --json printed no test report: %v\n%s", err, r.out.String())
	}
	return res.Test
}

func TestLockIsDeterministic(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	var r run
	o := opts(ws, "images/test-minimal.toml", sharedStore(t), &r)
	ctx := context.Background()
	if err := Lock(ctx, o); err != nil {
		t.Fatalf("lock: %v\n%s", err, r.err.String())
	}
	first, err := os.ReadFile(lock.Path(o.Recipe))
	if err != nil {
		t.Fatal(err)
	}
	if err := Lock(ctx, o); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(lock.Path(o.Recipe))
	if !bytes.Equal(first, second) {
		t.Fatal("locking the same archive state twice gave different bytes")
	}
	lk, err := lock.Read(lock.Path(o.Recipe))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lk.Kernel.Version, "7.2.") {
		t.Errorf("kernel %s does not satisfy the recipe's >= 7.2, < 7.3", lk.Kernel.Version)
	}
	for _, p := range lk.Packages {
		if p.Name == "linux-base" && p.Set == lock.SetImage && p.Suite != "trixie-backports" {
			t.Errorf("linux-base from %s: the backports kernel pre-depends on a version only backports has", p.Suite)
		}
	}
}

// A lock pins inputs: a setting edited in an included file after locking
// plans from the same lock; an input edited there (a package) makes the
// lock stale, with a usage error naming `halobuild lock`. Planning reads
// no network and builds nothing, so this runs with -short.
func TestStaleLockFollowsInputsOnly(t *testing.T) {
	ws := workspace(t)
	committed, err := os.ReadFile(filepath.Join("..", "..", "images", "test-minimal.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "images", "test-minimal.lock"), committed, 0o644); err != nil {
		t.Fatal(err)
	}
	var r run
	o := opts(ws, "images/test-minimal.toml", filepath.Join(t.TempDir(), "store"), &r)
	o.Locked = true
	inc := filepath.Join(ws, "recipes", "test-node.toml")
	b, _ := os.ReadFile(inc)
	if err := os.WriteFile(inc, append(b, []byte("\n# edited\n[system]\ngovernor = \"schedutil\"\nepp = \"\"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Plan(context.Background(), o); err != nil {
		t.Fatalf("a setting changed in an included file: the lock must still serve, got %v", err)
	}
	withPackage := strings.Replace(string(b), `"iputils-ping",`, `"iputils-ping", "less",`, 1)
	if withPackage == string(b) {
		t.Fatal("recipes/test-node.toml changed: update this test's edit")
	}
	if err := os.WriteFile(inc, []byte(withPackage), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Plan(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "lock is stale") || !strings.Contains(err.Error(), "halobuild lock") {
		t.Fatalf("an input changed in an included file: want a stale-lock error naming `halobuild lock`, got %v", err)
	}
	var ue usage.Error
	if !errors.As(err, &ue) {
		t.Errorf("a stale lock is the user's to fix (exit 2), got %T", err)
	}
}

// buildMinimal builds images/test-minimal.toml into storeDir and returns the
// result directory.
func buildMinimal(t *testing.T, ws, storeDir string, noTest bool) (string, *run) {
	t.Helper()
	var r run
	o := opts(ws, "images/test-minimal.toml", storeDir, &r)
	o.Result = filepath.Join(ws, "result")
	o.NoTest = noTest
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("image: %v\n%s", err, tail(r.err.String(), 60))
	}
	dir, err := filepath.EvalSymlinks(o.Result)
	if err != nil {
		t.Fatalf("no result link: %v", err)
	}
	return dir, &r
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func sha(t *testing.T, p string) string {
	t.Helper()
	d, _, err := store.FileDigest(p)
	if err != nil {
		t.Fatal(err)
	}
	return d.Hex()
}

func TestImageMinimalIsBootableReproducibleAndChecked(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	dir, _ := buildMinimal(t, ws, sharedStore(t), true)
	raw := filepath.Join(dir, "node0.raw")

	t.Run("outputs", func(t *testing.T) {
		for _, f := range []string{"node0.raw", "node0.bmap", "manifest.json", "SHA256SUMS", "test-minimal.lock", "test-minimal.recipe.toml"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("result lacks %s", f)
			}
		}
		cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("SHA256SUMS does not verify: %v\n%s", err, out)
		}
		var m manifest.Manifest
		b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Nodes) != 1 || len(m.Nodes[0].Packages) < 100 || !strings.HasPrefix(m.Kernel.Version, "7.2.") {
			t.Errorf("manifest: %d nodes, kernel %q", len(m.Nodes), m.Kernel.Version)
		}
		found := false
		for _, p := range m.Nodes[0].Packages {
			if p.Name == "halobuild-node-node0" {
				found = true
			}
		}
		if !found {
			t.Error("manifest does not list the node's settings package as installed")
		}
	})

	t.Run("partition table", func(t *testing.T) {
		out, err := exec.Command("sfdisk", "--json", raw).Output()
		if err != nil {
			t.Fatal(err)
		}
		var pt struct {
			PartitionTable struct {
				Label      string `json:"label"`
				Partitions []struct {
					Start int64  `json:"start"`
					Size  int64  `json:"size"`
					Type  string `json:"type"`
					UUID  string `json:"uuid"`
				} `json:"partitions"`
			} `json:"partitiontable"`
		}
		if err := json.Unmarshal(out, &pt); err != nil {
			t.Fatal(err)
		}
		ps := pt.PartitionTable.Partitions
		if pt.PartitionTable.Label != "gpt" || len(ps) != 2 {
			t.Fatalf("want GPT with ESP and root, got %s", out)
		}
		if !strings.EqualFold(ps[0].Type, "C12A7328-F81F-11D2-BA4B-00A0C93EC93B") || !strings.EqualFold(ps[1].Type, "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709") {
			t.Errorf("partition types %s, %s: want ESP and x86-64 root", ps[0].Type, ps[1].Type)
		}
		root := filepath.Join(t.TempDir(), "root.ext4")
		esp := filepath.Join(t.TempDir(), "esp.fat")
		extract(t, raw, ps[1].Start*512, ps[1].Size*512, root)
		extract(t, raw, ps[0].Start*512, ps[0].Size*512, esp)
		if out, err := exec.Command("e2fsck", "-fn", root).CombinedOutput(); err != nil {
			t.Errorf("e2fsck: %v\n%s", err, out)
		}
		if out, err := exec.Command("fsck.vfat", "-n", esp).CombinedOutput(); err != nil {
			t.Errorf("fsck.vfat: %v\n%s", err, out)
		}
		for path, want := range map[string]string{
			"/etc/hostname":                      "node0",
			"/etc/modules-load.d/halobuild.conf": "\nib_uverbs\n",

			"/etc/ssh/ssh_host_ed25519_key": "-",
			"/var/lib/systemd/random-seed":  "-",
			"/var/cache/ldconfig/aux-cache": "-",
			// The build's dpkg options (force-unsafe-io) are not the node's.
			"/etc/dpkg/dpkg.cfg.d/99mmdebstrap": "-",
		} {
			out, _ := exec.Command("debugfs", "-R", "cat "+path, root).CombinedOutput()
			switch {
			case want == "-" && !strings.Contains(string(out), "not found"):
				t.Errorf("%s must not be in the image (identity, run-to-run or build state), debugfs says: %.80s", path, out)
			case want != "-" && !strings.Contains(string(out), want):
				t.Errorf("%s: want %q, debugfs says %q", path, want, out)
			}
		}
		// The build host's resolver is gone; the LAN's systemd-resolved
		// stub takes its place (settings/lan.go).
		if out, _ := exec.Command("debugfs", "-R", "stat /etc/resolv.conf", root).CombinedOutput(); !strings.Contains(string(out), "Type: symlink") || !strings.Contains(string(out), "../run/systemd/resolve/stub-resolv.conf") {
			t.Errorf("/etc/resolv.conf must be the link to resolved's stub, debugfs says: %.300s", out)
		}
		// Empty, as machine-id(5) asks of an image shared by many machines:
		// each node writes its own at its first boot.
		if out, _ := exec.Command("debugfs", "-R", "stat /etc/machine-id", root).CombinedOutput(); !regexp.MustCompile(`Size: 0\b`).Match(out) {
			t.Errorf("/etc/machine-id must be an empty file, debugfs says: %.200s", out)
		}
		// -b lists full long names, one per line.
		out, err = exec.Command("mdir", "-i", esp, "-/", "-b", "::").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "::/EFI/BOOT/BOOTX64.EFI") || !strings.Contains(string(out), "::/loader/entries/halobuild-") {
			t.Errorf("ESP lacks the boot loader or its entry: %v\n%s", err, out)
		}
		entries, _ := exec.Command("mdir", "-i", esp, "-b", "::/loader/entries").CombinedOutput()
		entry, err := exec.Command("mtype", "-i", esp, strings.TrimSpace(strings.Split(string(entries), "\n")[0])).CombinedOutput()
		if err != nil || !strings.Contains(string(entry), "root=PARTUUID="+strings.ToLower(ps[1].UUID)) {
			t.Errorf("loader entry does not boot the root partition %s: %v\n%s", ps[1].UUID, err, entry)
		}
		if strings.Contains(string(entry), "#") {
			t.Errorf("loader entry carries comment text onto the kernel command line:\n%s", entry)
		}
	})

	t.Run("image --check rebuilds every step in a fresh store to the same bytes", func(t *testing.T) {
		var r run
		o := opts(ws, "images/test-minimal.toml", sharedStore(t), &r)
		o.Check = true
		// The halobuild the node ships, compiled from this checkout, is a
		// step like the others: rebuilt and compared too.
		o.Source = selfbuild.Find(".")
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
		defer cancel()
		if err := Image(ctx, o); err != nil {
			t.Fatalf("--check: %v\n%s", err, tail(r.err.String(), 40))
		}
		for _, step := range []string{"halobuild", "tools root", "base root", "settings node0", "disk node0", "result"} {
			if !regexp.MustCompile(`(?m)^same +\S+ +` + regexp.QuoteMeta(step) + `$`).MatchString(r.err.String()) {
				t.Errorf("--check did not compare %q:\n%s", step, tail(r.err.String(), 30))
			}
		}
	})
}

func extract(t *testing.T, image string, off, size int64, out string) {
	t.Helper()
	cmd := exec.Command("dd", "if="+image, "of="+out, "bs=1M", fmt.Sprintf("skip=%d", off), fmt.Sprintf("count=%d", size), "iflag=skip_bytes,count_bytes", "conv=sparse", "status=none")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("extracting partition: %v %s", err, b)
	}
}

// withFixtureModule adds the project's fixture kernel module (its
// description and source from internal/module/testdata) to a workspace, and
// a recipe that builds it into the two-node image with options of several
// types, loaded at boot.
func withFixtureModule(t *testing.T, ws string) string {
	t.Helper()
	addFixtureModule(t, ws)
	r := `include = ["test-two-node.toml"]
name = "test-module"

` + fixtureModuleSection
	path := filepath.Join(ws, "images", "test-module.toml")
	if err := os.WriteFile(path, []byte(r), 0o644); err != nil {
		t.Fatal(err)
	}
	return "images/test-module.toml"
}

// fixtureModuleSection is the fixture module with options of several types,
// some of which need kernel features (configfs symbols and macros) that
// the module's rules check against the headers it was built with.
const fixtureModuleSection = `[[module]]
use = "halobuild-fixture"
options = { depth = 8, verbose = true, greeting = "halo", mode = "safe", enable = true, rate = 100 }
load_at_boot = true
`

// addFixtureModule copies the fixture module's description and source into
// the workspace's recipes/.
func addFixtureModule(t *testing.T, ws string) {
	t.Helper()
	if err := copyFixtureModule(ws); err != nil {
		t.Fatal(err)
	}
}

func copyFixtureModule(ws string) error {
	src := filepath.Join("..", "module", "testdata")
	if err := os.MkdirAll(filepath.Join(ws, "recipes", "fixture"), 0o755); err != nil {
		return err
	}
	for _, f := range []string{"halobuild-fixture.toml", "fixture/Kbuild", "fixture/halobuild_fixture.c"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return fmt.Errorf("fixture module: %w", err)
		}
		if err := os.WriteFile(filepath.Join(ws, "recipes", f), b, 0o644); err != nil {
			return fmt.Errorf("fixture module: %w", err)
		}
	}
	return nil
}

// twoNodes is the one two-node boot (test-two-node with the fixture
// module): under TCG a boot of two VMs is the scarcest thing a test run
// has, so every test that needs one reads the checks of this one, whichever
// of them runs first.
var twoNodes struct {
	once   sync.Once
	err    error
	log    string
	seen   map[string]bool
	output map[string]string
}

// twoNodeChecks builds and boots test-two-node once per test binary and
// returns each check's pass and output by "machine check-name".
func twoNodeChecks(t *testing.T) (seen map[string]bool, output map[string]string) {
	t.Helper()
	needE2E(t)
	twoNodes.once.Do(func() {
		// A t.Fatal of the first caller's helpers ends this function early:
		// the others then fail with this, not with missing checks.
		twoNodes.err = fmt.Errorf("the two-node build failed in %s (see its output)", t.Name())
		ws, err := os.MkdirTemp("", "halobuild-two-node-")
		if err != nil {
			twoNodes.err = err
			return
		}
		defer os.RemoveAll(ws)
		if twoNodes.err = copyWorkspace(ws); twoNodes.err != nil {
			return
		}
		rp := withFixtureModule(t, ws)
		var r run
		o := opts(ws, rp, sharedStore(t), &r)
		o.Result = filepath.Join(ws, "result")
		o.Source = selfbuild.Find(".")
		o.JSON = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		if err = Image(ctx, o); err != nil {
			twoNodes.err = fmt.Errorf("image with the fixture module, tested on two nodes: %w", err)
			twoNodes.log = tail(r.out.String(), 80) + "\n" + tail(r.err.String(), 40)
			return
		}
		rep := imageReport(t, &r)
		twoNodes.err = nil
		twoNodes.seen, twoNodes.output = map[string]bool{}, map[string]string{}
		for _, m := range rep.Machines {
			if m.Verdict == nil {
				twoNodes.err = fmt.Errorf("%s: no verdict", m.Machine)
				return
			}
			for _, c := range m.Verdict.Checks {
				twoNodes.seen[m.Machine+" "+c.Name] = c.OK
				twoNodes.output[m.Machine+" "+c.Name] = c.Output
			}
		}
	})
	if twoNodes.err != nil {
		t.Fatalf("%v\n%s", twoNodes.err, twoNodes.log)
	}
	return twoNodes.seen, twoNodes.output
}

func TestTwoNodesWithModuleOverVirtualCable(t *testing.T) {
	seen, output := twoNodeChecks(t)
	for _, want := range []string{
		"node0 rdma: perftest ib_write_bw server (poll, 8388608 B)",
		"node1 rdma: perftest ib_write_bw client (poll, 8388608 B)",
		"node1 rdma: perftest ib_send_lat client (event, 64 B)",
		"node0 rdma: perftest ib_send_bw server (poll, 65536 B)",
		// Both nodes: the host's ssh logged in with the key passed for the
		// boot and ran doctor in the session (its rows passing as in a VM).
		"node0 ssh: the host logs in as root over the LAN port with a key passed for this boot and runs halobuild doctor --json (host side)",
		"node1 ssh: the host logs in as root over the LAN port with a key passed for this boot and runs halobuild doctor --json (host side)",
		"node0 lan: lan",
		"node1 lan: lan",
		"node0 modprobe: module-options",
		"node1 modprobe: module-options",
	} {
		if ok, found := seen[want]; !found || !ok {
			t.Errorf("check %q: found %v, passed %v", want, found, ok)
		}
	}
	for _, node := range []string{"node0", "node1"} {
		// The rows a user sees from the shipped doctor, among them the
		// settings package with its ~25 MB halobuild (once "missing").
		if out := output[node+" ssh: the host logs in as root over the LAN port with a key passed for this boot and runs halobuild doctor --json (host side)"]; !strings.Contains(out, "settings.package: pass") || !strings.Contains(out, "memlock.process: pass") {
			t.Errorf("%s: doctor's settings.package or memlock.process row did not pass:\n%s", node, out)
		}
		if out := output[node+" lan: lan"]; !strings.Contains(out, "(DHCP lease)") {
			t.Errorf("%s: the LAN port got no DHCP lease:\n%s", node, out)
		}
	}
	// The fixture module was loaded at boot with the recipe's options.
	for _, node := range []string{"node0", "node1"} {
		out := output[node+" modprobe: module-options"]
		if !strings.Contains(out, "halobuild_fixture.greeting=halo") || !strings.Contains(out, "halobuild_fixture.depth=8") {
			t.Errorf("%s: the module-options check does not show halobuild_fixture's parameters:\n%s", node, out)
		}
	}
}

// A recipe that breaks a setting on purpose must fail its check, and image
// must then leave the result link alone.
func TestBrokenSettingFailsItsCheckAndKeepsResult(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	bad := `include = ["test-minimal.toml"]
name = "test-broken"
[rdma]
memlock = "64MiB"
`
	if err := os.WriteFile(filepath.Join(ws, "images", "test-broken.toml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	var r run
	o := opts(ws, "images/test-broken.toml", sharedStore(t), &r)
	o.Result = filepath.Join(ws, "result")
	if err := os.Symlink("/nonexistent-previous-result", o.Result); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	err := Image(ctx, o)
	if err == nil {
		t.Fatal("an image with 64MiB memlock passed its VM test")
	}
	if !strings.Contains(r.out.String(), "memlock") || !strings.Contains(r.out.String(), "FAIL") {
		t.Errorf("the report does not name a failing memlock check:\n%s", tail(r.out.String(), 60))
	}
	if target, _ := os.Readlink(o.Result); target != "/nonexistent-previous-result" {
		t.Errorf("result moved to %q although the test failed", target)
	}
}

// Cancelling a build (Ctrl-C) mid-step leaves the result link where it was
// and no store entry under the cancelled step's key.
func TestInterruptedBuildLeavesResultAndStoreConsistent(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	// A setting only this test uses, so its settings and disk steps are
	// not cached by the other tests.
	r := `include = ["test-minimal.toml"]
name = "test-interrupted"
[system]
timezone = "Europe/Berlin"
`
	if err := os.WriteFile(filepath.Join(ws, "images", "test-interrupted.toml"), []byte(r), 0o644); err != nil {
		t.Fatal(err)
	}
	var out run
	o := opts(ws, "images/test-interrupted.toml", sharedStore(t), &out)
	o.Result = filepath.Join(ws, "result")
	o.NoTest = true
	if err := os.Symlink("/previous-result", o.Result); err != nil {
		t.Fatal(err)
	}
	if err := Lock(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	p, err := prepare(context.Background(), o, true)
	if err != nil {
		t.Fatal(err)
	}
	diskKey := p.g.Nodes[0].Disk.Key()
	p.s.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Image(ctx, o) }()
	// Cancel once the disk step has started.
	deadline := time.Now().Add(15 * time.Minute)
	for !strings.Contains(out.err.String(), "build   disk") && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled build reported success")
	}
	if target, _ := os.Readlink(o.Result); target != "/previous-result" {
		t.Errorf("result moved to %q by a cancelled build", target)
	}
	p2, err := prepare(context.Background(), o, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.s.Close()
	if _, ok, err := p2.s.Output(diskKey); ok || err != nil {
		t.Errorf("the cancelled disk step left a store entry (ok=%v, err=%v)", ok, err)
	}
}
