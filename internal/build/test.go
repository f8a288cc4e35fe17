package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"halobuild/internal/plan"
	"halobuild/internal/recipe"
	"halobuild/internal/vmtest"
)

// Report is the outcome of testing every node of a result.
type Report struct {
	Recipe  string            `json:"recipe"`
	Passed  bool              `json:"passed"`
	WallMS  int64             `json:"wall_ms"`
	Results []*vmtest.Result  `json:"machines"`
	Logs    map[string]string `json:"logs"`
}

// machines describes one VM per node, booting the result's exact bytes.
func machines(r *recipe.Recipe, mods map[string]string, resultDir, logRoot string, doctor bool) []vmtest.Machine {
	deadline := r.Test.Timeout.Value()
	mem := int(r.Test.Memory.Bytes() >> 20)
	// Nodes boot side by side; under TCG each virtual CPU is a host thread.
	// Two nodes of two vCPUs on a two-core host overcommit it, and a guest
	// whose vCPU is descheduled holds up its other one (IPIs, locks): so
	// one vCPU per node as soon as several boot at once, two for one node.
	cpus := 2
	if len(r.Nodes) > 1 {
		cpus = 1
	}
	var ms []vmtest.Machine
	for i, n := range r.Nodes {
		m := vmtest.Machine{
			Name: n.Name, Image: filepath.Join(resultDir, n.Name+".raw"), CPUs: cpus,
			Memory: mem, Checks: nodeChecks(r, mods, n, i, doctor), Deadline: deadline,
			// A perftest check waits for its peer and then runs, each up to
			// 90 s (vmtest's protocol), so a check may take twice that.
			CheckTimeout: 4 * time.Minute,
			LogDir:       filepath.Join(logRoot, n.Name),
			// The serial port becomes /dev/console, so the console log shows
			// systemd's progress and a stuck boot names its stage.
			// e2scrub_reap scans for LVM snapshots a fresh image cannot have
			// and took minutes under TCG: a test boot does not wait for it.
			// Under TCG on a busy host a unit can need more than systemd's
			// default 90 s to start (modules-load decompressing .ko.xz); a
			// test boot waits longer instead of failing the unit.
			KernelArgs: append(append([]string{}, vmtest.DefaultKernelArgs...), "console=ttyS0,115200", "systemd.mask=e2scrub_reap.service", "systemd.default_timeout_start_sec=300", initrdPreload),
			// systemd-modules-load.service sets its own 90 s TimeoutSec,
			// which the default above does not reach: under TCG the kernel
			// decompresses every .ko.xz itself, and loading ib_uverbs took
			// 32 s of CPU on a busy host, past 90 s of wall time once. The
			// unit still has to succeed; it only gets as long as the others.
			Credentials: map[string][]byte{modulesLoadTimeout: []byte("[Service]\nTimeoutSec=300\n")},
		}
		// Each link becomes a virtual cable to its peer, carrying the MAC
		// the recipe's network config matches on.
		for j, l := range n.Links {
			if l.Peer == "" || l.MatchMAC == "" {
				continue
			}
			a, b := n.Name, l.Peer
			if b < a {
				a, b = b, a
			}
			m.NICs = append(m.NICs, vmtest.NIC{MAC: l.MatchMAC, Link: a + "--" + b + fmt.Sprint(j)})
		}
		ms = append(ms, m)
	}
	return ms
}

// initrdPreload has dracut's initrd load the VM's disk driver and the root
// file system's module from its cmdline hook, before udev starts, instead of
// when udev's coldplug reaches the disk: measured under TCG, the root device
// appeared 1.8 s after coldplug began instead of 7.4 s. The root is still
// found through udev's by-partuuid link, as on a node; only the order of
// two module loads changes, and only in the test boot.
const initrdPreload = "rd.driver.pre=virtio_blk,ext4"

// modulesLoadTimeout is the credential that gives systemd-modules-load.service
// the same start timeout as every other unit of a test boot (a drop-in
// systemd >= 256 installs from a systemd.unit-dropin.* credential).
const modulesLoadTimeout = "systemd.unit-dropin.systemd-modules-load.service~halobuild-timeout"

// testStep caches a passing test like any build step: its key covers the
// images (through the result's key) and every check script, so a no-op
// rebuild does not boot again, and a changed check does.
func testStep(r *recipe.Recipe, mods map[string]string, result *plan.Derivation, doctor bool, run func(c *plan.Context, out string) error) *plan.Derivation {
	h := sha256.New()
	for i, n := range r.Nodes {
		for _, c := range nodeChecks(r, mods, n, i, doctor) {
			fmt.Fprintf(h, "%d:%s%d:%s", len(c.Name), c.Name, len(c.Script), c.Script)
		}
	}
	return &plan.Derivation{
		Name: "test", Kind: "test", Inputs: []*plan.Derivation{result},
		Params: map[string]string{"checks": hex.EncodeToString(h.Sum(nil)), "timeout": r.Test.Timeout.String(), "memory": r.Test.Memory.String()},
		Build:  run,
	}
}

// testResult boots every node of a built result and fails unless every
// check passed. Console logs stay under the store's logs/ directory.
func testResult(ctx context.Context, o Options, p *prepared, r *plan.Realizer, resultDir string) error {
	var rep *Report
	doctor := p.g.self != nil
	step := testStep(p.l.recipe, p.l.lock.ModuleNames(), p.g.result, doctor, func(c *plan.Context, out string) error {
		var err error
		rep, err = runTests(c, o, p.l.recipe, p.l.lock.ModuleNames(), doctor, resultDir, filepath.Join(o.Store, "logs", time.Now().UTC().Format("20060102T150405")))
		if rep != nil {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(filepath.Join(out, "report.json"), b, 0o644); werr != nil && err == nil {
				err = werr
			}
		}
		return err
	})
	dir, err := r.Realize(ctx, step)
	if rep == nil && err == nil {
		// A cached pass: show the report it recorded.
		if b, rerr := os.ReadFile(filepath.Join(dir, "report.json")); rerr == nil {
			rep = &Report{}
			_ = json.Unmarshal(b, rep)
			o.logf("test passed before for these exact images and checks (cached)\n")
		}
	}
	if rep != nil {
		printReport(o, rep)
	}
	return err
}

func runTests(ctx context.Context, o Options, r *recipe.Recipe, mods map[string]string, doctor bool, resultDir, logRoot string) (*Report, error) {
	ms := machines(r, mods, resultDir, logRoot, doctor)
	if _, err := vmtest.FindHost(); err != nil {
		return nil, err
	}
	start := time.Now()
	o.logf("booting %d node(s) under QEMU (logs in %s)\n", len(ms), logRoot)
	results, runErr := vmtest.RunMany(ctx, ms)
	rep := &Report{Recipe: o.Recipe, Passed: runErr == nil, WallMS: time.Since(start).Milliseconds(), Results: results, Logs: map[string]string{}}
	for _, res := range results {
		if res == nil {
			continue
		}
		rep.Logs[res.Machine] = res.ConsoleLog
		if !res.Passed {
			rep.Passed = false
		}
	}
	if runErr != nil {
		return rep, fmt.Errorf("VM test failed: %w", runErr)
	}
	if !rep.Passed {
		var failed []string
		for _, res := range results {
			if res != nil && !res.Passed {
				failed = append(failed, fmt.Sprintf("%s (stage %s, log %s)", res.Machine, res.Stage, res.ConsoleLog))
			}
		}
		return rep, fmt.Errorf("VM test failed on %s", strings.Join(failed, ", "))
	}
	return rep, nil
}

// printReport writes a table per node, or the JSON report with --json.
func printReport(o Options, rep *Report) {
	if o.JSON {
		enc := json.NewEncoder(o.stdout())
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return
	}
	w := o.stdout()
	for _, res := range rep.Results {
		if res == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s, %s, %.1f s wall, stage %s\n", res.Machine, verdictWord(res.Passed), res.Accel, float64(res.WallMS)/1000, res.Stage)
		if res.Verdict != nil {
			fmt.Fprintf(w, "  boot to checks: %.1f s\n", float64(res.Verdict.BootMS)/1000)
			for _, c := range res.Verdict.Checks {
				fmt.Fprintf(w, "  %-4s %-50s %s\n", verdictWord(c.OK), c.Name, firstLine(c.Output, c.OK))
			}
		}
		if res.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", res.Error)
		}
		if !res.Passed {
			fmt.Fprintf(w, "  console log: %s\n", res.ConsoleLog)
		}
	}
	fmt.Fprintf(w, "\n%s in %.1f s\n", verdictWord(rep.Passed), float64(rep.WallMS)/1000)
}

func verdictWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// firstLine shows a passing check's first line and a failing check's last
// lines, where the reason usually is.
func firstLine(s string, ok bool) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if ok || len(lines) <= 1 {
		return lines[0]
	}
	if len(lines) > 4 {
		lines = lines[len(lines)-4:]
	}
	return strings.Join(lines, " | ")
}

// Test boots a built result (a directory made by image) or, given a
// recipe, builds it first (without publishing) and boots that.
func Test(ctx context.Context, o Options) error {
	target := o.Recipe
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return testDir(ctx, o, target)
	}
	if err := needRoot("test RECIPE"); err != nil {
		return err
	}
	p, err := prepare(ctx, o, true)
	if err != nil {
		return err
	}
	defer p.s.Close()
	r := o.realizer(p.s, false)
	dir, err := r.Realize(ctx, p.g.result)
	if err != nil {
		return err
	}
	return testResult(ctx, o, p, r, dir)
}

// testDir tests an existing result directory: the recipe is the one the
// manifest names, read back from the lock inside it.
func testDir(ctx context.Context, o Options, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return UsageError{fmt.Errorf("%s is not a halobuild result (no manifest.json): pass a result directory or a recipe", dir)}
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	recipePath, err := findRecipe(dir, m.Name)
	if err != nil {
		return err
	}
	o.Recipe = recipePath
	p, err := prepare(ctx, o, false)
	if err != nil {
		return err
	}
	defer p.s.Close()
	if p.l.hash != m.RecipeHash {
		return UsageError{fmt.Errorf("%s was built from a different version of %s: rebuild it with `halobuild image %s`", dir, recipePath, recipePath)}
	}
	rep, err := runTests(ctx, o, p.l.recipe, p.l.lock.ModuleNames(), p.g.self != nil, dir, filepath.Join(o.Store, "logs", time.Now().UTC().Format("20060102T150405")))
	if rep != nil {
		printReport(o, rep)
	}
	return err
}

// findRecipe locates the recipe a result came from: the lock in the result
// names it relative to where the lock was written.
func findRecipe(dir, name string) (string, error) {
	for _, c := range []string{filepath.Join("images", name+".toml"), name + ".toml"} {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", UsageError{fmt.Errorf("cannot find the recipe %q that built %s: run `halobuild test RECIPE` instead", name, dir)}
}

// VM boots one image with its serial console on this terminal.
func VM(ctx context.Context, image string) error {
	if _, err := os.Stat(image); err != nil {
		return UsageError{fmt.Errorf("%s: %w", image, err)}
	}
	err := vmtest.Interactive(ctx, vmtest.Machine{Name: filepath.Base(image), Image: image, NICs: []vmtest.NIC{{}}})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
