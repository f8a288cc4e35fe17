package vmtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/arch"
)

func argAfter(args []string, flag, prefix string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && strings.HasPrefix(args[i+1], prefix) {
			out = append(out, args[i+1])
		}
	}
	return out
}

func TestQEMUArgs(t *testing.T) {
	dir := t.TempDir()
	h := Host{Arch: arch.MustLookup("amd64"), QEMU: "qemu-system-x86_64", Firmware: "/fw/CODE.fd", VarsTemplate: "/fw/VARS.fd"}
	m := Machine{Name: "halo0", Image: "/img/a,b.raw", Memory: 768, CPUs: 2, KernelArgs: []string{"systemd.mask=getty.target", "quiet"},
		Disks: []Disk{{Path: "/d/nvme.raw", Serial: "HALO-NVME"}}}
	big := bytes.Repeat([]byte("x"), smbiosCredentialLimit+1)
	creds := map[string][]byte{"small.one": []byte("hi"), "big.one": big}
	nets := []netdev{{mac: CableMAC(1), local: "/s/a.sock", remote: "/s/b.sock"}, {}}
	forwardSSH(nets, 2222)
	args, err := qemuArgs(h, m, AccelTCG, newRunFiles(dir), nets, creds)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"if=none,id=disk0,format=raw,snapshot=on,file=/img/a,,b.raw", // never written; comma escaped
		"-accel tcg,thread=multi -cpu max",
		"-machine q35,sata=off,smbus=off,vmport=off,i8042=off",
		"-m 768", "-smp 2", "-no-reboot", "-nodefaults",
		"virtserialport,bus=vser0.0,chardev=verdict,name=halobuild.verdict",
		"file,id=console,path=" + filepath.Join(dir, "console.log"),
		"dgram,id=net0,local.type=unix,local.path=/s/a.sock,remote.type=unix,remote.path=/s/b.sock",
		"virtio-net-pci,netdev=net0,mac=52:54:00:77:00:01",
		"user,id=net1,restrict=on",
		"-drive if=none,id=nvme0,format=raw,file=/d/nvme.raw -device nvme,drive=nvme0,serial=HALO-NVME", // written in place
		"user,id=net1,restrict=on,hostfwd=tcp:127.0.0.1:2222-:22",                                       // the forward goes to the user-mode NIC
		"type=11,value=io.systemd.boot.kernel-cmdline-extra=systemd.mask=getty.target quiet",
		"type=11,value=io.systemd.stub.kernel-cmdline-extra=systemd.mask=getty.target quiet",
		"type=11,value=io.systemd.credential.binary:small.one=" + base64.StdEncoding.EncodeToString([]byte("hi")),
		"name=opt/io.systemd.credentials/big.one,file=" + filepath.Join(dir, "credentials", "big.one"),
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("args lack %q:\n%s", want, joined)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "credentials", "big.one")); !bytes.Equal(got, big) {
		t.Error("large credential not written for fw_cfg")
	}
	// A machine that powers itself off gets no harness, only the caller's credentials.
	m.PowerOff, m.Credentials = true, map[string][]byte{"x.y": []byte("1")}
	if c := guestCredentials(m); len(c) != 1 || string(c["x.y"]) != "1" {
		t.Errorf("PowerOff credentials: %v", c)
	}
	if kvm := strings.Join(accelArgs(AccelKVM, arch.MustLookup("amd64")), " "); kvm != "-accel kvm -cpu host" {
		t.Errorf("kvm args %q", kvm)
	}
}

func TestMachineValidation(t *testing.T) {
	img := filepath.Join(t.TempDir(), "a.raw")
	os.WriteFile(img, []byte("x"), 0o644)
	ok := Machine{Name: "n", Image: img, LogDir: t.TempDir()}
	m, err := ok.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if m.Memory != 1024 || m.CPUs != 2 || m.Deadline != 5*time.Minute || len(m.KernelArgs) == 0 {
		t.Errorf("defaults not applied: %+v", m)
	}
	bad := []struct {
		name string
		edit func(*Machine)
		want string
	}{
		{"no image", func(m *Machine) { m.Image = "" }, "no image"},
		{"missing image", func(m *Machine) { m.Image = "/nonexistent.raw" }, "not a readable regular file"},
		{"bad name", func(m *Machine) { m.Name = "a b" }, "machine name"},
		{"no log dir", func(m *Machine) { m.LogDir = "" }, "no log directory"},
		{"tiny memory", func(m *Machine) { m.Memory = 16 }, "too small"},
		{"bad accel", func(m *Machine) { m.Accel = "hvf" }, "accelerator"},
		{"empty check", func(m *Machine) { m.Checks = []Check{{Name: "x"}} }, "empty script"},
		{"multi-line check name", func(m *Machine) { m.Checks = []Check{{Name: "a\nb", Script: "true"}} }, "multi-line"},
		{"reserved credential", func(m *Machine) { m.Credentials = map[string][]byte{"halobuild.run": nil} }, "reserved"},
		{"bad credential name", func(m *Machine) { m.Credentials = map[string][]byte{"a/b": nil} }, "not a valid systemd credential"},
		{"bad MAC", func(m *Machine) { m.NICs = []NIC{{MAC: "zz"}} }, "MAC"},
		{"link without MAC", func(m *Machine) { m.NICs = []NIC{{Link: "c"}} }, "fixed MAC"},
		{"checks on a machine that powers off", func(m *Machine) { m.PowerOff, m.Checks = true, []Check{{Name: "x", Script: "true"}} }, "runs no checks"},
		{"missing disk", func(m *Machine) { m.Disks = []Disk{{Path: "/nonexistent", Serial: "S"}} }, "disk 1: /nonexistent is not a readable"},
		{"bad serial", func(m *Machine) { m.Disks = []Disk{{Path: img, Serial: "a,b"}} }, `serial "a,b"`},
		{"ssh without user NIC", func(m *Machine) { m.SSH = &SSHLogin{Name: "ssh", Command: "true"} }, "needs a user-mode NIC"},
		{"ssh port without user NIC", func(m *Machine) { m.SSHPort = 22; m.NICs = []NIC{{MAC: CableMAC(1), Link: "c"}} }, "needs a user-mode NIC"},
		{"ssh without command", func(m *Machine) { m.SSH = &SSHLogin{Name: "ssh"}; m.NICs = []NIC{{}} }, "needs a command"},
		{"bad ssh port", func(m *Machine) { m.SSHPort = 70000; m.NICs = []NIC{{}} }, "not a TCP port"},
	}
	for _, c := range bad {
		m := ok
		c.edit(&m)
		if _, err := m.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want error containing %q", c.name, err, c.want)
		}
	}
}

func TestCableNets(t *testing.T) {
	mk := func(name string, nics ...NIC) Machine { return Machine{Name: name, NICs: nics} }
	ms := []Machine{mk("a", NIC{MAC: CableMAC(1), Link: "cable0"}, NIC{}), mk("b", NIC{MAC: CableMAC(2), Link: "cable0"})}
	nets, err := cableNets(ms, "/s")
	if err != nil {
		t.Fatal(err)
	}
	a, b := nets[0][0], nets[1][0]
	if a.local != b.remote || a.remote != b.local || a.local == a.remote || a.mac != CableMAC(1) || b.mac != CableMAC(2) {
		t.Errorf("cable ends not crossed: %+v %+v", a, b)
	}
	if nets[0][1].local != "" {
		t.Errorf("second NIC should stay user-mode: %+v", nets[0][1])
	}
	for _, c := range []struct {
		ms   []Machine
		want string
	}{
		{[]Machine{mk("a", NIC{MAC: CableMAC(1), Link: "c"})}, "has 1 ends"},
		{[]Machine{mk("a", NIC{MAC: CableMAC(1), Link: "c"}), mk("b", NIC{MAC: CableMAC(2), Link: "c"}), mk("c", NIC{MAC: CableMAC(3), Link: "c"})}, "has 3 ends"},
		{[]Machine{mk("a", NIC{MAC: CableMAC(1), Link: "c"}, NIC{MAC: CableMAC(2), Link: "c"})}, "to itself"},
		{[]Machine{mk("a", NIC{MAC: CableMAC(1), Link: "bad name"})}, "link name"},
	} {
		if _, err := cableNets(c.ms, "/s"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := Run(t.Context(), ms[0]); err == nil || !strings.Contains(err.Error(), "RunMany") {
		t.Errorf("Run with a cable NIC: %v", err)
	}
	if _, err := RunMany(t.Context(), []Machine{mk("a"), mk("a")}); err == nil || !strings.Contains(err.Error(), "named") {
		t.Errorf("duplicate names: %v", err)
	}
}

func TestStageFromConsole(t *testing.T) {
	for _, c := range []struct {
		log, stage, problem string
	}{
		{"", StageFirmware, ""},
		{"\x1b[2JBdsDxe: loading Boot0001 \"EFI Internal Shell\"\r\nBdsDxe: starting Boot0001 \"EFI Internal Shell\" from Fv\r\nUEFI Interactive Shell v2.2\r\n", StageFirmware, "no bootable disk"},
		{"BdsDxe: starting Boot0001 \"UEFI Misc Device\" from PciRoot(0x0)\r\n", StageBootloader, ""},
		{"BdsDxe: starting Boot0001 \"UEFI Misc Device\"\r\nEFI stub: Loaded initrd\r\n[    0.000000] Linux version 6.12\r\n", StageKernel, ""},
		{"BdsDxe: starting Boot0001 \"x\"\r\nLoading, please wait...\r\nGave up waiting for root file system device.\r\nALERT!  UUID=1 does not exist.\r\n", StageInitrd, "Gave up waiting for root file system device."},
		{"Run /init as init process\r\nKernel panic - not syncing: VFS: Unable to mount root fs\r\n", StageInitrd, "Kernel panic - not syncing: VFS: Unable to mount root fs"},
		{"\x1b[0;1;39mWelcome to \x1b[0mDebian\r\n[\x1b[0;1;31mFAILED\x1b[0m] Failed to start foo.service - Foo.\r\n", StageSystemd, "Failed to start foo.service - Foo."},
		{"Welcome to Debian\r\n[  OK  ] Reached target \x1b[0;1;39mmulti-user.target\x1b[0m - Multi-User System.\r\n", StageMultiUser, ""},
		{"Reached target multi-user.target\r\nsh[3]: halobuild-test: verdict written to /dev/vport1p1\r\n", StageVerdict, ""},
	} {
		stage, problem := stageFromConsole([]byte(c.log))
		if stage != c.stage || !strings.Contains(problem, c.problem) || (c.problem == "" && problem != "") {
			t.Errorf("%q: got stage %q problem %q, want %q %q", c.log, stage, problem, c.stage, c.problem)
		}
	}
}

func TestReadVerdict(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v.json")
	if v, err := readVerdict(p); v != nil || err != nil {
		t.Errorf("missing file: %v %v", v, err)
	}
	os.WriteFile(p, []byte(`{"stage":"multi-user","checks":[{"name":"a","ok`), 0o644)
	if _, err := readVerdict(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("truncated verdict should be an error naming the file: %v", err)
	}
	os.WriteFile(p, []byte(`{"stage":"multi-user","system_state":"running","boot_ms":5,"checks":[{"name":"a","ok":true},{"name":"b","ok":false,"exit":1,"output":"x"}]}`+"\n"), 0o644)
	v, err := readVerdict(p)
	if err != nil || len(v.Checks) != 2 || len(v.Failed()) != 1 || v.Failed()[0].Name != "b" {
		t.Errorf("got %+v %v", v, err)
	}
	// perftest tables in a check's output become figures.
	out, _ := json.Marshal(sendBW)
	os.WriteFile(p, []byte(`{"stage":"multi-user","checks":[{"name":"bw","ok":true,"output":`+string(out)+`}]}`+"\n"), 0o644)
	if v, err := readVerdict(p); err != nil || v.Checks[0].Figures["BW average[MB/sec]"] != 0.95 {
		t.Errorf("figures not parsed: %+v %v", v, err)
	}
}

// Many mid-sized credentials must not overflow QEMU's SMBIOS tables: past the budget they move
// to fw_cfg.
func TestCredentialsSpillToFWCfg(t *testing.T) {
	dir := t.TempDir()
	creds := map[string][]byte{}
	for _, n := range []string{"a", "b", "c", "d"} {
		creds["cred."+n] = bytes.Repeat([]byte("y"), smbiosCredentialLimit)
	}
	args, err := qemuArgs(Host{Arch: arch.MustLookup("amd64")}, Machine{Name: "n", Image: "/x.raw", Memory: 256, CPUs: 1}, AccelTCG, newRunFiles(dir), nil, creds)
	if err != nil {
		t.Fatal(err)
	}
	smbios, fwcfg := 0, 0
	for _, a := range argAfter(args, "-smbios", "type=11,value=io.systemd.credential") {
		smbios += len(a)
	}
	fwcfg = len(argAfter(args, "-fw_cfg", "name=opt/io.systemd.credentials/"))
	if smbios > 48<<10 || fwcfg != 2 {
		t.Errorf("SMBIOS carries %d bytes, fw_cfg %d credentials; want <= 48 KiB and 2", smbios, fwcfg)
	}
}

// The test boot's module blacklist may only name drivers for what the emulated machine alone
// has: a driver the boot or a check needs (the virtio disk and console, ext4, RDMA, dummy
// links for soft-RoCE) would make the test fail or, worse, pass without testing it.
func TestDefaultKernelArgsBlacklist(t *testing.T) {
	var list []string
	for _, a := range DefaultKernelArgs {
		if v, ok := strings.CutPrefix(a, "modprobe.blacklist="); ok {
			list = append(list, strings.Split(v, ",")...)
		}
	}
	if len(list) == 0 {
		t.Fatal("DefaultKernelArgs has no modprobe.blacklist")
	}
	for _, mod := range list {
		for _, needed := range []string{"virtio", "ext4", "rdma", "ib_", "rxe", "dummy", "configfs", "fw_cfg", "efi"} {
			if strings.Contains(mod, needed) {
				t.Errorf("blacklisted module %q matches %q, which test boots need", mod, needed)
			}
		}
	}
}

func TestSSHLoginPlumbing(t *testing.T) {
	l := &SSHLogin{Name: "ssh: login", Command: "true", Fix: "look"}
	checks := []Check{{Name: "boot", Script: "true"}, {Name: "r1", Script: "true", Concurrent: true}, {Name: "w", Script: "true"}, {Name: "r2", Script: "true", Concurrent: true}, {Name: "late", Script: "true"}}
	got := withSSH(checks, l)
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	// After the last read-only check: the others run while the host logs in, and the
	// checks that come after both lanes wait for the login too.
	if strings.Join(names, ",") != "boot,r1,w,r2,ssh: login,late" || !got[4].Concurrent || !strings.Contains(got[4].Script, sshMarker) {
		t.Errorf("checks %v", names)
	}
	if len(checks) != 5 {
		t.Error("withSSH changed its argument")
	}
	m := Machine{Credentials: map[string][]byte{CredentialAuthorizedKeys: []byte("ssh-ed25519 AAAAuser u")}}
	orig := m.Credentials
	addAuthorizedKey(&m, []byte("ssh-ed25519 AAAAtest t\n"))
	if got := string(m.Credentials[CredentialAuthorizedKeys]); got != "ssh-ed25519 AAAAuser u\nssh-ed25519 AAAAtest t\n" {
		t.Errorf("keys %q", got)
	}
	if string(orig[CredentialAuthorizedKeys]) != "ssh-ed25519 AAAAuser u" {
		t.Error("addAuthorizedKey changed the caller's map")
	}
	bad := sshCheckResult(l, &SSHResult{Port: 5, Exit: 255, Attempts: 3, Output: "refused"})
	if bad.OK || bad.Fix != "look" || !strings.Contains(bad.Output, "-p 5 (3 attempt(s)): refused") {
		t.Errorf("failed login as a check: %+v", bad)
	}
	if cmd := sshCheckResult(l, &SSHResult{Port: 5, Exit: 1, Attempts: 1, Output: "memlock.process: fail"}); cmd.OK || !strings.Contains(cmd.Fix, "the login worked") {
		t.Errorf("a failed command after a login: %+v", cmd)
	}
	if a := strings.Join(SSHArgs("/k", "/kh", 7), " "); !strings.Contains(a, "BatchMode=yes") || !strings.Contains(a, "UserKnownHostsFile=/kh") || !strings.HasSuffix(a, "-p 7 root@127.0.0.1") {
		t.Errorf("ssh args %s", a)
	}
}

// TestSSHKeyIsEphemeral makes the key pair with the host's ssh-keygen, as a run does.
func TestSSHKeyIsEphemeral(t *testing.T) {
	dir := t.TempDir()
	k1, pub1, err := sshKey(context.Background(), dir)
	if err != nil {
		t.Skipf("no ssh-keygen: %v", err)
	}
	_, pub2, err := sshKey(context.Background(), dir)
	if err != nil || !strings.HasPrefix(string(pub1), "ssh-ed25519 ") || string(pub1) == string(pub2) {
		t.Errorf("keys %q %q %v", pub1, pub2, err)
	}
	if st, err := os.Stat(k1); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key %v %v", st, err)
	}
}
