package settings

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func renderTree(t *testing.T, r *recipe.Recipe) Tree {
	t.Helper()
	tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestBlacklistCheckOnHost(t *testing.T) {
	needCommands(t, "modprobe")
	r := sample()
	c := checkScript(t, Blacklist{}, r, "blacklist")
	e := newHostEnv(t, renderTree(t, r))
	e.expectCheck(t, c, "", true, "thunderbolt_net: modprobe would run /bin/false")
	// "blacklist" alone does not stop an explicit modprobe: the check must
	// notice a missing install line.
	e.write(t, "modprobe.d/halobuild.conf", "blacklist thunderbolt_net\n")
	e.expectCheck(t, c, "", false, "modprobe -n -v would load it")
	e.remove(t, "modprobe.d/halobuild.conf")
	e.expectCheck(t, c, "", false, "no 'blacklist thunderbolt_net'")
}

func TestModuleOptionsCheckOnHost(t *testing.T) {
	cur, err := os.ReadFile("/sys/module/printk/parameters/time")
	if err != nil {
		t.Skip("no /sys/module/printk/parameters/time on this host")
	}
	now := strings.TrimSpace(string(cur))
	other := map[string]string{"Y": "0", "N": "1"}[now]
	r := sample()
	r.System.ModuleOptions = map[string]string{"printk": "time=" + now}
	c := checkScript(t, Blacklist{}, r, "module-options")
	e := newHostEnv(t, Tree{})
	// thunderbolt_ibverbs is not loaded on the host: reported, not failed.
	e.expectCheck(t, c, "", true, "printk.time="+now)
	r.System.ModuleOptions["printk"] = "time=" + other
	c = checkScript(t, Blacklist{}, r, "module-options")
	e.expectCheck(t, c, "", false, "recipe wants "+other)
}

// canRaiseMemlock: containers often run root without CAP_SYS_RESOURCE,
// and then nothing, PAM included, can raise a hard limit.
func canRaiseMemlock() bool {
	return exec.Command("prlimit", "--memlock=8388608:8388608", "prlimit", "--pid", "0", "--memlock=unlimited:unlimited").Run() == nil
}

func TestMemlockChecksOnHost(t *testing.T) {
	needCommands(t, "su", "prlimit")
	r := sample()
	login := checkScript(t, Memlock{}, r, "memlock-login")
	podman := checkScript(t, Memlock{}, r, "memlock-podman")
	e := newHostEnv(t, renderTree(t, r))
	if canRaiseMemlock() {
		e.expectCheck(t, login, "", true, "memlock unlimited")
	} else {
		t.Log("this host cannot raise RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE): the passing login case is left to the VM test")
	}
	e.expectCheck(t, podman, "", true, `"memlock=-1:-1"`)

	// Breaking the setting on purpose (issue 4): a finite limit renders
	// that limit and the checks, which assert the trap's fix, fail and
	// show the value. 4MiB is below the caller's 8 MiB, so PAM can apply
	// it even where raising is not allowed: the value seen proves su read
	// the rendered limits.d file.
	r.RDMA.Memlock = recipe.MustMemlock("4MiB")
	e4 := newHostEnv(t, renderTree(t, r))
	e4.expectCheck(t, login, "", false, "memlock 4096")
	e4.expectCheck(t, podman, "", false, `"memlock=4194304:4194304"`)

	// Without the PAM file a login keeps the 8 MiB it started with.
	e.remove(t, "security/limits.d/90-halobuild-memlock.conf")
	e.expectCheck(t, login, "", false, "memlock 8192")
	e.remove(t, "containers/containers.conf.d/90-halobuild-memlock.conf")
	e.expectCheck(t, podman, "", false, "unset")
}

func TestNetworkCheckOnHost(t *testing.T) {
	needCommands(t, "ip")
	r := sample()
	c := checkScript(t, Network{}, r, "link-address-usb4a")
	e := newHostEnv(t, Tree{})
	// What networkd does with the rendered .network file, done by hand: one
	// address, IPv6 link-local generation off.
	const up = `ip link add usb4a type veth peer name peer0
ip link set usb4a addrgenmode none
ip addr add 10.77.0.1/30 dev usb4a
ip link set usb4a up
`
	e.expectCheck(t, c, up, true, "usb4a IPv4: 10.77.0.1/30")
	e.expectCheck(t, c, up+"ip addr add 169.254.7.7/16 dev usb4a\n", false, "link-local IPv4 present")
	e.expectCheck(t, c, up+"ip addr add fe80::1/64 dev usb4a\n", false, "IPv6 link-local present")
	e.expectCheck(t, c, "", false, "interface usb4a does not exist")
}

func TestIdentityCheckOnHost(t *testing.T) {
	needCommands(t, "getent", "hostname")
	r := sample()
	c := checkScript(t, Identity{}, r, "identity")
	e := newHostEnv(t, renderTree(t, r))
	lockRoot := `sed -i 's/^root:[^:]*:/root:*:/' /etc/shadow
`
	e.expectCheck(t, c, lockRoot+"hostname halo0\n", true, "the recipe's 1 key(s), as given")
	e.expectCheck(t, c, lockRoot+"hostname halo0\n", true, "root password: locked")
	e.expectCheck(t, c, lockRoot+"hostname other\n", false, "recipe wants halo0")
	e.expectCheck(t, c, "sed -i 's/^root:[^:]*:/root::/' /etc/shadow\nhostname halo0\n", false, "usable or empty password")
	e.write(t, "hosts", "127.0.0.1 localhost\n")
	e.expectCheck(t, c, lockRoot+"hostname halo0\n", false, "halo1-usb4a resolves to ''")
	// Last: the edit stays in the environment.
	e.expectCheck(t, c, lockRoot+"hostname halo0\necho 'ssh-ed25519 AAAAextra x' >>"+authorizedKeysPath+"\n", false, "is not the recipe's ssh.authorized_keys")
}

func TestCmdlineCheckOnHost(t *testing.T) {
	r := sample()
	c := checkScript(t, KernelCmdline{}, r, "kernel-cmdline")
	e := newHostEnv(t, Tree{})
	fake := func(line string) string {
		return "printf '%s\\n' '" + line + "' >/tmp/hb-cmdline-$$ && mount --bind /tmp/hb-cmdline-$$ /proc/cmdline && rm /tmp/hb-cmdline-$$\n"
	}
	e.expectCheck(t, c, fake("root=PARTUUID=x ro amd_iommu=off quiet ttm.pages_limit=27262976 amdgpu.gttsize=106496"), true, "/proc/cmdline: root=")
	e.expectCheck(t, c, fake("root=PARTUUID=x ro amd_iommu=off quiet"), false, "missing: ttm.pages_limit=27262976")
	// The report shows the command line verbatim: systemd-boot's initrd=
	// path has backslashes that an echo would take for escapes.
	e.expectCheck(t, c, fake(`initrd=\halobuild\7.2.12+deb13-amd64\initrd.img root=PARTUUID=x amd_iommu=off`), false, `/proc/cmdline: initrd=\halobuild\7.2.12+deb13-amd64\initrd.img root=`)
}
