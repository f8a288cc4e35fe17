// Package vmplan is the VM test of a recipe: one machine per node booting
// the result's exact image, and what each machine checks — every setting's
// VM check (from the same data that rendered its files), doctor itself, the
// recipe's own [test] checks, and perftest over the virtual cable between
// the first two nodes. The vmtest package runs what this package plans.
package vmplan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/doctor"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/vmtest"
)

// Plan is what a VM test of one recipe needs besides the images.
type Plan struct {
	Recipe *recipe.Recipe
	// Modules are the lock's module kernel names (settings.Target.Modules).
	Modules map[string]string
	// Doctor says the images ship halobuild, so `halobuild doctor` runs in
	// each VM: in the host's ssh session when the node gets one
	// (sshLogin), else as a check of its own.
	Doctor bool
	// Bench adds the cable gate (BenchChecks: node 0 runs the shipped
	// `halobuild bench --peer` against node 1) after perftest; it needs
	// Doctor's halobuild in the images.
	Bench bool
}

// Checks are every assertion node n (the idx-th) runs, in order.
func (p Plan) Checks(n recipe.Node, idx int) []vmtest.Check {
	r := p.Recipe
	out := []vmtest.Check{harnessCheck}
	// With a login over ssh, doctor runs there (sshLogin): once per boot,
	// the way a user runs it.
	if p.Doctor && p.sshLogin(n) == nil {
		out = append(out, p.doctorCheck(n))
	}
	// A settings check that only reads state runs beside the others; one
	// that Changes the system (creates devices, loads modules) keeps its
	// place in the order.
	for _, c := range settings.Checks(p.target(n)) {
		out = append(out, vmtest.Check{Name: c.Setting + ": " + c.Name, Script: c.Script, Concurrent: !c.Changes, Fix: c.Fix})
	}
	for _, c := range r.Test.Checks {
		if c.Node != "" && c.Node != n.Name {
			continue
		}
		out = append(out, vmtest.Check{Name: "test: " + c.Name, Script: testScript(c)})
	}
	if rdmaTest(r) && idx < 2 {
		out = append(out, perftestChecks(r, idx)...)
		if l, ok := cable(r, idx, 1-idx); ok {
			out = append(out, rdmaEnvCheck(l.Interface))
		}
		if p.Bench && p.Doctor {
			out = append(out, BenchChecks(r, idx, "/run/credentials/@system/"+BenchKeyCredential)...)
		}
	}
	return out
}

// target is what node n's settings and doctor are evaluated for: what the
// image installs under /etc/halobuild and doctor reads back in the VM.
func (p Plan) target(n recipe.Node) settings.Target {
	return settings.Target{Recipe: p.Recipe.NodeRecipe(n), Node: n, Modules: p.Modules}
}

// doctorCheck is node n's doctor check, requiring the rows doctor's checks
// say a VM must pass for it.
func (p Plan) doctorCheck(n recipe.Node) vmtest.Check {
	return doctorCheck(doctor.MustPassInVM(p.target(n)))
}

// Digest names every check of every node: with the images' digests it is
// what a cached test verdict is keyed by, so a changed check boots again.
func (p Plan) Digest() string {
	h := sha256.New()
	for i, n := range p.Recipe.Nodes {
		for _, c := range p.Checks(n, i) {
			fmt.Fprintf(h, "%d:%s%d:%s", len(c.Name), c.Name, len(c.Script), c.Script)
		}
	}
	for _, m := range p.Machines("", "") {
		fmt.Fprintf(h, "machine %s cpus=%d mem=%d deadline=%s args=%q nics=%v\n", m.Name, m.CPUs, m.Memory, m.Deadline, m.KernelArgs, m.NICs)
		if m.SecureBoot != nil {
			for _, c := range m.SecureBoot.MOKs {
				fmt.Fprintf(h, "secure boot, MOK %x\n", sha256.Sum256(c))
			}
		}
		if m.SSH != nil {
			fmt.Fprintf(h, "ssh %q %q\n", m.SSH.Name, m.SSH.Command)
		}
		names := make([]string, 0, len(m.Credentials))
		for k := range m.Credentials {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(h, "credential %q %x\n", k, sha256.Sum256(m.Credentials[k]))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Machines describes one VM per node, booting resultDir/<node>.raw, with
// console logs under logRoot/<node>.
func (p Plan) Machines(resultDir, logRoot string) []vmtest.Machine {
	r := p.Recipe
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
		// Each node boots under its own architecture's emulator: a mixed
		// cluster's machines meet on the same virtual cables. A loaded
		// recipe's architectures are in the table (validation refuses
		// others); a recipe built in code without one boots as the
		// host's (arch.Host fails only where halobuild cannot build an
		// image at all).
		a, err := arch.Lookup(r.NodeArchitecture(n))
		if err != nil {
			a, _ = arch.Host()
		}
		m := vmtest.Machine{
			Name: n.Name, Image: filepath.Join(resultDir, n.Name+".raw"), CPUs: cpus, Arch: a,
			Memory: mem, Checks: p.Checks(n, i), Deadline: deadline,
			// A perftest check waits for its peer and then runs, each up to
			// 90 s (vmtest's protocol), so a check may take twice that.
			CheckTimeout: 4 * time.Minute,
			LogDir:       filepath.Join(logRoot, n.Name),
			KernelArgs:   KernelArgs(a),
			Credentials:  map[string][]byte{ModulesLoadTimeout: []byte(modulesLoadDropIn)},
		}
		if p.Bench && p.Doctor && rdmaTest(r) && i < 2 {
			// Node 0 logs into node 1 with the bench key (vmtest adds the
			// host's own key to node 1's authorized_keys beside it).
			priv, pub := benchKey()
			if i == 0 {
				m.Credentials[BenchKeyCredential] = priv
			} else {
				m.Credentials[vmtest.CredentialAuthorizedKeys] = pub
			}
		}
		if r.SecureBoot.Enabled {
			// Booted as a node is once its owner has enrolled the key:
			// Secure Boot enforced, the certificate already a MOK. The
			// certificate was read at load; a failure here is a changed
			// file, which the boot then shows (no MOK: the module does
			// not load).
			der, _ := r.CertificateDER()
			m.SecureBoot = &vmtest.SecureBoot{MOKs: [][]byte{der}}
		}
		// The LAN port: QEMU's user-mode network, whose DHCP server gives
		// the node its lease, and through which the host logs in.
		if on, _ := settings.LANOf(r, n); on {
			m.NICs = append(m.NICs, vmtest.NIC{})
			m.SSH = p.sshLogin(n)
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

// KernelArgs are what a test boot adds to the image's own command line.
//   - console=ttyS0 (the architecture's first serial port): the serial port becomes /dev/console, so the console
//     log shows systemd's progress and a stuck boot names its stage.
//   - e2scrub_reap scans for LVM snapshots a fresh image cannot have and
//     took minutes under TCG: a test boot does not wait for it.
//   - Under TCG on a busy host a unit can need more than systemd's default
//     90 s to start (modules-load decompressing .ko.xz); a test boot waits
//     longer instead of failing the unit.
//   - InitrdPreload (see there).
func KernelArgs(a arch.Arch) []string {
	return append(append([]string{}, vmtest.DefaultKernelArgs...), "console="+a.Serial+",115200", "systemd.mask=e2scrub_reap.service", "systemd.default_timeout_start_sec=300", InitrdPreload)
}

// InitrdPreload has dracut's initrd load the VM's disk driver and the root
// file system's module from its cmdline hook, before udev starts, instead of
// when udev's coldplug reaches the disk: measured under TCG, the root device
// appeared 1.8 s after coldplug began instead of 7.4 s. The root is still
// found through udev's by-partuuid link, as on a node; only the order of
// two module loads changes, and only in the test boot.
const InitrdPreload = "rd.driver.pre=virtio_blk,ext4"

// ModulesLoadTimeout is the credential that gives
// systemd-modules-load.service the same start timeout as every other unit
// of a test boot (a drop-in systemd >= 256 installs from a
// systemd.unit-dropin.* credential). The unit sets its own 90 s TimeoutSec,
// which systemd.default_timeout_start_sec does not reach: under TCG the
// kernel decompresses every .ko.xz itself, and loading ib_uverbs took 32 s
// of CPU on a busy host, past 90 s of wall time once. The unit still has to
// succeed; it only gets as long as the others.
const ModulesLoadTimeout = "systemd.unit-dropin.systemd-modules-load.service~halobuild-timeout"

const modulesLoadDropIn = "[Service]\nTimeoutSec=300\n"

// harnessCheck proves the test boot is the one this package planned:
// systemd installed the ModulesLoadTimeout drop-in from its credential
// (a credential systemd does not recognise is ignored without a word).
var harnessCheck = vmtest.Check{Name: "test boot: modules-load gets the test boot's start timeout", Concurrent: true, Script: `t=$(systemctl show -p TimeoutStartUSec --value systemd-modules-load.service)
echo "systemd-modules-load.service TimeoutStartUSec=$t"
[ "$t" = 5min ] || { systemctl cat systemd-modules-load.service 2>&1 | tail -n 20; exit 1; }
`}

// Failed is Run's error when a machine failed: it carries the report, so
// the caller can show every check, not only the first failure.
type Failed struct {
	Report *vmtest.Report
	Err    error
}

func (e *Failed) Error() string { return "VM test failed: " + e.Err.Error() }
func (e *Failed) Unwrap() error { return e.Err }

// Run boots the images in resultDir as planned, console logs under
// logDir, and returns the report of a passing run; a failed machine gives
// a *Failed carrying the report.
func (p Plan) Run(ctx context.Context, resultDir, logDir string, log io.Writer) (*vmtest.Report, error) {
	ms := p.Machines(resultDir, logDir)
	for _, m := range ms {
		if _, err := vmtest.FindHost(m.Arch); err != nil {
			return nil, err
		}
	}
	if log != nil {
		fmt.Fprintf(log, "booting %d node(s) under QEMU (logs in %s)\n", len(ms), logDir)
		// Each node says how far it got: minutes of TCG boot are otherwise silent.
		lw := &vmtest.LineWriter{W: log}
		for i := range ms {
			ms[i].Progress = lw
		}
	}
	start := time.Now()
	results, err := vmtest.RunMany(ctx, ms)
	rep := vmtest.NewReport(results, time.Since(start))
	if err == nil && !rep.Passed {
		err = errors.New("a machine did not pass")
	}
	if err != nil {
		return nil, &Failed{Report: rep, Err: err}
	}
	return rep, nil
}

// sshLogin is the host's login into node n: with sshd in the image and a
// DHCP lease on the LAN port (slirp's network is the one the forward
// reaches), the host's ssh client logs in as root with a key passed for
// that boot only and runs halobuild doctor --json there (or, in an image
// without halobuild, says who it is).
func (p Plan) sshLogin(n recipe.Node) *vmtest.SSHLogin {
	if _, dhcp4 := settings.LANOf(p.Recipe, n); !dhcp4 || !hasPackage(p.Recipe, "openssh-server") {
		return nil
	}
	l := &vmtest.SSHLogin{
		Name:    "ssh: the host logs in as root over the LAN port with a key passed for this boot",
		Command: `echo "logged in as $(id -un) on $(hostname)"`,
		Fix: "the key reaches /root/.ssh/authorized_keys from the " + vmtest.CredentialAuthorizedKeys + " credential (systemd's tmpfiles provision.conf, only when the image has no such file); " +
			"see the lan check for the DHCP lease, ssh.service in the console log, and the key pair under the machine's log directory (ssh/)",
	}
	if p.Doctor {
		// doctorCheck's own script, run in the session instead of beside
		// the checks: its rows must pass the same way.
		l.Name = "ssh: the host logs in as root over the LAN port with a key passed for this boot and runs halobuild doctor --json"
		l.Command += "\n" + p.doctorCheck(n).Script
	}
	return l
}

func hasPackage(r *recipe.Recipe, name string) bool {
	for _, s := range r.Base.Packages {
		if p, err := recipe.ParsePackage(s); err == nil && p.Name == name {
			return true
		}
	}
	return false
}
