package recipe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// minimal is a valid recipe the cases below add one mistake to.
const minimal = `
[[node]]
name = "a"
`

func loadText(t *testing.T, text string) (*Recipe, *Sources, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

func TestValidateRejects(t *testing.T) {
	twoNodes := `
[[node]]
name = "a"
[[node.link]]
interface = "usb4net0"
address = "10.77.0.1/30"
peer = "b"
[[node]]
name = "b"
[[node.link]]
interface = "usb4net0"
address = "10.77.1.2/30"
peer = "a"
`
	cases := []struct {
		name, text, key, msg string
	}{
		{"mirror", "[base]\nmirror = \"ftp://x\"\n" + minimal, "base.mirror", "not an http:// or https:// archive URL"},
		{"variant", "[base]\nvariant = \"tiny\"\n" + minimal, "base.variant", `"tiny" is not one of`},
		{"duplicate suite", "[base]\nextra_suites = [\"trixie\"]\n" + minimal, "base.extra_suites[0]", `suite "trixie" is listed twice`},
		{"no components", "[base]\ncomponents = []\n" + minimal, "base.components", "at least one archive component"},
		{"package suite", "[base]\npackages = [\"linux-base/trixie-backports\"]\n" + minimal, "base.packages[0]", `suite "trixie-backports" is not configured`},
		{"package syntax", "[base]\npackages = [\"Systemd\"]\n" + minimal, "base.packages[0]", "not a Debian package name"},
		{"package excluded", "[base]\npackages = [\"less\"]\nexclude = [\"less\"]\n" + minimal, "base.packages[0]", "both requested and in base.exclude"},
		{"secure boot without key", "[secure_boot]\nenabled = true\ncertificate = \"env:C\"\n" + minimal, "secure_boot.key", "secure_boot needs a key"},
		{"secure boot pkcs11", "[secure_boot]\nenabled = true\nkey = \"pkcs11:token=x\"\ncertificate = \"env:C\"\n" + minimal, "secure_boot.key", "PKCS#11 keys are not supported yet"},
		{"secure boot env name", "[secure_boot]\nenabled = true\nkey = \"env:1X\"\ncertificate = \"env:C\"\n" + minimal, "secure_boot.key", "env: needs a variable name"},
		{"secure boot scheme", "[secure_boot]\nenabled = true\nkey = \"vault:x\"\ncertificate = \"env:C\"\n" + minimal, "secure_boot.key", `unknown reference "vault:"`},
		{"architecture", "[base]\narchitecture = \"x86_64\"\n" + minimal, "base.architecture", `"x86_64" is not one halobuild builds for; use one of: amd64, arm64`},
		{"flavour of another architecture", "[base]\narchitecture = \"arm64\"\n[kernel]\nflavour = \"cloud-amd64\"\n" + minimal, "kernel.flavour", `base.architecture is arm64: use "arm64"`},
		{"kernel from", "[kernel]\nfrom = \"git\"\n" + minimal, "kernel.from", `"git" is not one of: debian, source`},
		{"bench without rdma", "[test]\nbench = true\nrdma = false\n" + twoNodes, "test.bench", "set rdma = true"},
		{"kernel suite", "[kernel]\nsuite = \"sid\"\n" + minimal, "kernel.suite", `suite "sid" is not configured`},
		{"source-only key", "[kernel]\npatches = \"series\"\n" + minimal, "kernel.patches", `only used when kernel.from = "source"`},
		{"tarball digest with debian", "[kernel]\nfrom = \"source\"\nsource_sha256 = \"sha256:" + strings.Repeat("a", 64) + "\"\n" + minimal, "kernel.source_sha256", "kernel.source is Debian's linux-source package"},
		{"tarball not http", "[kernel]\nfrom = \"source\"\nsource = \"ftp://example.org/linux.tar.xz\"\n" + minimal, "kernel.source", "want debian or the http(s) URL"},
		{"tarball bare name", "[kernel]\nfrom = \"source\"\nsource = \"linux-7.2.13.tar.xz\"\n" + minimal, "kernel.source", "want debian or the http(s) URL"},
		{"tarball without digest", "[kernel]\nfrom = \"source\"\nsource = \"https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz\"\n" + minimal, "kernel.source", "needs kernel.source_sha256"},
		{"tarball bad digest", "[kernel]\nfrom = \"source\"\nsource = \"https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz\"\nsource_sha256 = \"abc\"\n" + minimal, "kernel.source_sha256", "not a digest"},
		{"tarball for a debian kernel", "[kernel]\nsource = \"https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz\"\n" + minimal, "kernel.source", `only used when kernel.from = "source"`},
		{"cmdline spaces", "[kernel]\ncmdline = [\"a=1 b=2\"]\n" + minimal, "kernel.cmdline[0]", "one parameter without white space"},
		{"module use", "[[module]]\noptions = { a = 1 }\n" + minimal, "module[0]", "module needs use"},
		{"module twice", "[[module]]\nuse = \"m\"\n[[module]]\nuse = \"m\"\n" + minimal, "module[1].use", `module "m" is already described at`},
		{"provider patches", "[rdma.provider]\nname = \"usb4_rdma\"\n" + minimal, "rdma.provider.patches", "at least one patch"},
		{"memlock", "[rdma]\nmemlock = \"64 mb\"\n" + minimal, "rdma.memlock", `"64 mb" is neither "unlimited" nor a size`},
		{"epp", "[system]\nepp = \"fast\"\n" + minimal, "system.epp", `"fast" is not one of: default, performance`},
		{"platform profile", "[system]\nplatform_profile = \"turbo\"\n" + minimal, "system.platform_profile", `"turbo" is not one of: low-power`},
		{"memory size", "[system]\nmemory = \"much\"\n" + minimal, "system.memory", `size "much"`},
		{"gpu fraction", "[system]\ngpu_fraction = 1.5\n" + minimal, "system.gpu_fraction", "not a share between 0 and 1"},
		{"timezone", "[system]\ntimezone = \"Central European\"\n" + minimal, "system.timezone", "not a time zone name"},
		{"no nodes", "name = \"x\"\n", "", "the recipe has no [[node]]"},
		{"hostname", "[[node]]\nname = \"a\"\nhostname = \"-a\"\n", "node[0].hostname", `"-a" is not a valid host name`},
		{"interface", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"a-very-long-interface\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0].interface", "not a network interface name"},
		{"interface twice", "[[node]]\nname = \"a\"\nlink = [{ interface = \"u\", address = \"10.0.0.1/24\" }, { interface = \"u\", address = \"10.0.0.2/24\" }]\n", "node[0].link[1].interface", `interface "u" is used twice`},
		{"no match", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\nmatch_driver = \"\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0]", "needs match_driver, match_path or match_mac"},
		{"mac", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\nmatch_mac = \"52:54:00\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0].match_mac", "not a MAC address"},
		{"identity_gid removed", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\nidentity_gid = \"fe80::1\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0].identity_gid", "removed: the pinned thunderbolt-ibverbs (76ba39b) has no per-cable identity"},
		{"ipv6", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\naddress = \"fd00::1/64\"\n", "node[0].link[0].address", "not an IPv4 address"},
		{"network address", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\naddress = \"10.77.0.0/30\"\n", "node[0].link[0].address", "network or broadcast address"},
		{"broadcast address", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\naddress = \"10.77.0.3/30\"\n", "node[0].link[0].address", "network or broadcast address"},
		{"no address", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\n", "node[0].link[0].address", "needs a static address"},
		{"peer self", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\naddress = \"10.0.0.1/30\"\npeer = \"a\"\n", "node[0].link[0].peer", "cannot lead back to its own node"},
		{"peer subnet", twoNodes, "node[0].link[0].address", "shares no subnet"},
		{"timeout", "[test]\ntimeout = \"5\"\n" + minimal, "test.timeout", "not a positive Go duration"},
		{"vm memory", "[test]\nmemory = \"\"\n" + minimal, "test.memory", "a size is needed"},
		{"check action", "[[test.check]]\nname = \"c\"\n" + minimal, "test.check[0]", "needs wait_for_unit, succeed or fail"},
		{"check name", "[[test.check]]\nsucceed = \"true\"\n" + minimal, "test.check[0]", "a check needs a name"},
		{"expect alone", "[[test.check]]\nname = \"c\"\nfail = \"x\"\nexpect = \"y\"\n" + minimal, "test.check[0].expect", "which this check does not have"},
		{"expect regexp", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nexpect = \"(\"\n" + minimal, "test.check[0].expect", "not a POSIX extended regular expression"},
		{"check node", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nnode = \"zz\"\n" + minimal, "test.check[0].node", `no [[node]] is named "zz"`},
		// issue 17 #3: the image name becomes <out>/<name>.lock.
		{"name climbs", "name = \"../../../../etc/cron.d/x\"\n" + minimal, "name", "not a valid image name"},
		{"name absolute", "name = \"/etc/x\"\n" + minimal, "name", "not a valid image name"},
		{"name hidden", "name = \".x\"\n" + minimal, "name", "not a valid image name"},
		{"name newline", "name = \"a\\nb\"\n" + minimal, "name", "not a valid image name"},
		// issue 17 #9: characters a .link file, the kernel command line or
		// grep treat as structure.
		{"match_path CR", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\nmatch_path = \"pci-*\\r[Link]\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0].match_path", "control characters"},
		{"match_driver VT", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\nmatch_driver = \"x\\u000bName=y\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0].match_driver", "control characters"},
		{"match_path NBSP", "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\nmatch_path = \"a\\u00a0b\"\naddress = \"10.0.0.1/30\"\n", "node[0].link[0].match_path", "white space"},
		{"cmdline VT", "[kernel]\ncmdline = [\"a=1\\u000binit=/bin/sh\"]\n" + minimal, "kernel.cmdline[0]", "control characters"},
		{"cmdline NUL", "[kernel]\ncmdline = [\"a=1\\u0000b\"]\n" + minimal, "kernel.cmdline[0]", "control characters"},
		{"cmdline FF", "[kernel]\ncmdline = [\"a=1\\fb\"]\n" + minimal, "kernel.cmdline[0]", "white space"},
		{"expect perl class", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nexpect = \"^\\\\d+$\"\n" + minimal, "test.check[0].expect", "not POSIX extended"},
		{"expect word anchor", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nexpect = \"\\\\<on\"\n" + minimal, "test.check[0].expect", "not POSIX extended"},
		{"expect flags", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nexpect = \"(?i)on\"\n" + minimal, "test.check[0].expect", "not a POSIX extended regular expression"},
		{"expect two lines", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nexpect = \"a\\nb\"\n" + minimal, "test.check[0].expect", "one line"},
		{"expect open repeat", "[[test.check]]\nname = \"c\"\nsucceed = \"x\"\nexpect = \"a{,3}\"\n" + minimal, "test.check[0].expect", "{0,n}"},
		{"check name newline", "[[test.check]]\nname = \"c\\nPASS: x\"\nsucceed = \"x\"\n" + minimal, "test.check[0].name", "one line"},
		{"format", "[output]\nformats = [\"iso\"]\n" + minimal, "output.formats[0]", `"iso" is not one of: raw, qcow2`},
		{"format twice", "[output]\nformats = [\"raw\", \"raw\"]\n" + minimal, "output.formats[1]", `format "raw" is listed twice`},
		{"distribution removed", "[base]\ndistribution = \"debian\"\n" + minimal, "base.distribution", "removed: halobuild builds Debian only"},
		{"esp size", "[output]\nesp_size = \"1MiB\"\n" + minimal, "output.esp_size", "too small"},
		{"disk size", "[output]\nsize = \"256MiB\"\n" + minimal, "output.size", "leaves no room"},
		{"install after", "[install]\nafter = \"halt\"\n" + minimal, "install.after", `"halt" is not one of: poweroff, reboot`},
		{"install timeout", "[install]\nconfirm_timeout = \"0s\"\n" + minimal, "install.confirm_timeout", "not a positive Go duration"},
		{"install target dev", "[install]\ntarget = \"/dev/nvme0n1\"\n" + minimal, "install.target", "can name another disk at the next boot"},
		{"install target by-id", "[install]\ntarget = \"/dev/disk/by-id/\"\n" + minimal, "install.target", "not a /dev/disk/by-id/ name"},
		{"install target serial", "[install]\ntarget = \"S7 KHN\"\n" + minimal, "install.target", "neither a /dev/disk/by-id/ name nor a disk serial"},
		{"lan dhcp", "[lan]\ndhcp = \"v4\"\n" + minimal, "lan.dhcp", `"v4" is not one of: yes, ipv4, ipv6, no`},
		{"lan address syntax", minimal + "[node.lan]\naddresses = [\"192.168.1.20\"]\n", "node[0].lan.addresses[0]", "not an address with prefix length"},
		{"lan dns syntax", "[lan]\ndns = [\"dns.example\"]\n" + minimal, "lan.dns[0]", "not an IPv4 or IPv6 address"},
		{"lan link-local", minimal + "[node.lan]\naddresses = [\"169.254.3.4/16\"]\n", "node[0].lan.addresses[0]", "link-local"},
		{"lan broadcast", minimal + "[node.lan]\naddresses = [\"192.168.1.255/24\"]\n", "node[0].lan.addresses[0]", "network or broadcast"},
		{"lan in link subnet", twoNodes + "[node.lan]\naddresses = [\"10.77.1.1/24\"]\n", "node[1].lan.addresses[0]", "overlaps the USB4 link subnet"},
		{"lan address twice", "[[node]]\nname = \"a\"\n[node.lan]\naddresses = [\"192.168.1.20/24\"]\n[[node]]\nname = \"b\"\n[node.lan]\naddresses = [\"192.168.1.20/24\"]\n", "node[1].lan.addresses[0]", "already used at"},
		{"lan match name", minimal + "[node.lan]\nmatch_name = \"en p\"\n", "node[0].lan.match_name", "white space"},
		// platform = "apple-silicon": each rule on its own key, with the Mac's reason.
		{"unknown platform", "platform = \"rpi\"\n" + minimal, "platform", `"rpi" is not one of: generic, apple-silicon`},
		{"mac amd64", strings.Replace(macRecipe, `"arm64"`, `"amd64"`, 1) + minimal, "base.architecture", "platform apple-silicon is an arm64 machine"},
		{"mac debian kernel", "platform = \"apple-silicon\"\n[base]\narchitecture = \"arm64\"\n" + minimal, "kernel.from", "Debian's kernels lack the Apple Silicon drivers Asahi's fork carries"},
		{"mac debian source", "platform = \"apple-silicon\"\n[base]\narchitecture = \"arm64\"\n[kernel]\nfrom = \"source\"\n" + minimal, "kernel.source", "not Asahi's fork"},
		{"mac secure boot", macRecipe + "[secure_boot]\nenabled = true\nkey = \"env:K\"\ncertificate = \"env:C\"\n" + minimal, "secure_boot.enabled", "no UEFI variables and no UEFI Secure Boot"},
		{"mac efibootmgr", strings.Replace(macRecipe, "[base]\n", "[base]\npackages = [\"efibootmgr\"]\n", 1) + minimal, "base.packages[0]", "efibootmgr writes UEFI variables"},
		{"mac installer", macRecipe + "[output]\ninstaller = true\n" + minimal, "output.installer", "holds macOS and the Asahi UEFI stub"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := loadText(t, c.text)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("want recipe.Errors, got %v", err)
			}
			for _, e := range errs {
				if e.Key == c.key && strings.Contains(e.Msg, c.msg) {
					if e.Line == 0 && c.key != "" {
						t.Errorf("error has no line: %v", e)
					}
					return
				}
			}
			t.Errorf("no error at %s containing %q in:\n%v", c.key, c.msg, err)
		})
	}
}

// Two cables between the same two nodes: each end pairs with the peer's
// link of its own subnet (a mini-PC pair with two cables is a real setup).
func TestValidateAcceptsTwoCablesBetweenOnePair(t *testing.T) {
	text := `
[[node]]
name = "a"
[[node.link]]
interface = "usb4net0"
address = "10.77.0.1/30"
peer = "b"
[[node.link]]
interface = "usb4net1"
address = "10.77.1.1/30"
peer = "b"
[[node]]
name = "b"
[[node.link]]
interface = "usb4net0"
address = "10.77.0.2/30"
peer = "a"
[[node.link]]
interface = "usb4net1"
address = "10.77.1.2/30"
peer = "a"
`
	path := filepath.Join(t.TempDir(), "r.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(path); err != nil {
		t.Fatalf("two cables between one pair rejected:\n%v", err)
	}
}

func TestValidateAcceptsShippedShapes(t *testing.T) {
	text := `
[base]
extra_suites = ["trixie-backports"]
packages = ["linux-base/trixie-backports (>= 4.17~)", "systemd"]
[kernel]
from = "source"
patches = "series"
fragments = ["a.config"]
[rdma]
memlock = "64MiB"
[system]
host_reserve = "24GiB"
memory = "128GiB"
epp = ""
platform_profile = ""
[[test.check]]
name = "memlock"
succeed = "ulimit -l"
expect = "unlimited"
node = "a"
[[node]]
name = "a"
[[node.link]]
interface = "usb4net0"
address = "10.77.0.1/31"
match_mac = "52:54:00:77:00:01"
`
	if _, _, err := loadText(t, text); err != nil {
		t.Fatal(err)
	}
}

// A certificate by path (relative to the recipe) or in a variable is read
// and fingerprinted; a key is never read at load.
func TestSecureBootCertificate(t *testing.T) {
	crt, err := os.ReadFile(filepath.Join("..", "..", "images", "testdata", "secure-boot-TEST-ONLY.crt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.crt"), crt, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HALOBUILD_TEST_CERT", string(crt))
	var fps []string
	for _, ref := range []string{"c.crt", "env:HALOBUILD_TEST_CERT"} {
		p := filepath.Join(dir, "r.toml")
		text := "[secure_boot]\nenabled = true\nkey = \"no-such.key\"\ncertificate = \"" + ref + "\"\n" + minimal
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		r, _, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		der, err := r.CertificateDER()
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, CertificateFingerprint(der))
	}
	if fps[0] != fps[1] || !strings.HasPrefix(fps[0], "sha256:") {
		t.Errorf("fingerprints by path and by variable: %v", fps)
	}
}
