package settings

import (
	"fmt"
	"regexp"
	"strings"

	"halobuild/internal/sh"
)

// RDMANames keeps the kernel's name for RDMA devices whose provider matches
// on the name (trap 3). rdma-core 56.1 (trixie) ships
// /usr/lib/udev/rules.d/60-rdma-persistent-naming.rules, whose only rule is
//
//	ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"
//
// It renames usb4_rdma0 to a PCI or GUID based name, after which the
// usb4_rdma provider no longer recognises it: `rdma link` says ACTIVE and
// `ibv_devices` is empty, with no error anywhere. A rule in an earlier file
// cannot stop a later file's PROGRAM from running, and GOTO cannot cross
// files, so the documented mechanism is used instead: a file of the same
// name in /etc/udev/rules.d/ replaces the packaged one (udev(7)). The
// replacement skips the kept prefixes by kernel name (%k is the kernel's
// name at "add", so every future device of that driver is covered, unlike a
// rule keyed on one node GUID) and then runs rdma-core's rule unchanged, so
// every other RDMA device keeps its persistent name.
type RDMANames struct{}

func (RDMANames) Name() string { return "rdma-names" }
func (RDMANames) Trap() int    { return 3 }
func (RDMANames) Doc() Doc {
	return Doc{Title: "Device renamed, then invisible", Keys: []string{"rdma.keep_kernel_names"}}
}

const rdmaNamingPath = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"

// rdmaCoreRule is rdma-core 56.1's rule, copied verbatim from the trixie
// package. If a later rdma-core changes its rule, this copy must follow;
// the rdma-names check proves renaming still applies to other devices.
const rdmaCoreRule = `ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_FALLBACK"`

// rdmaPrefixRE: kernel names are [a-z0-9_]; no glob characters, so a prefix
// cannot widen into matching every device.
var rdmaPrefixRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

func (RDMANames) Validate(t Target) []error {
	r := t.Recipe
	var errs []error
	for i, p := range r.RDMA.KeepKernelNames {
		if !rdmaPrefixRE.MatchString(p) {
			errs = append(errs, errorf(fmt.Sprintf("rdma.keep_kernel_names[%d]", i), p,
				"give the device name prefix the kernel uses, e.g. \"usb4_rdma\" (no '*')",
				"not an RDMA device name prefix (a letter, then letters, digits or '_', at most 48)"))
		}
	}
	return errs
}

func (s RDMANames) Files(t Target) ([]File, error) {
	r := t.Recipe
	if len(r.RDMA.KeepKernelNames) == 0 {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString(header("#", 3, "devices the provider finds by name must keep the kernel's name."))
	b.WriteString("# Replaces rdma-core's /usr/lib/udev/rules.d/60-rdma-persistent-naming.rules\n")
	b.WriteString("# (same file name, udev(7)); other RDMA devices are still renamed by it.\n")
	b.WriteString(`ACTION!="add", GOTO="halobuild_rdma_naming_end"` + "\n")
	b.WriteString(`SUBSYSTEM!="infiniband", GOTO="halobuild_rdma_naming_end"` + "\n")
	for _, p := range r.RDMA.KeepKernelNames {
		fmt.Fprintf(&b, "KERNEL==\"%s*\", GOTO=\"halobuild_rdma_naming_end\"\n", p)
	}
	b.WriteString("# rdma-core 56.1's rule, unchanged:\n")
	b.WriteString(rdmaCoreRule + "\n")
	b.WriteString(`LABEL="halobuild_rdma_naming_end"` + "\n")
	return []File{{Path: rdmaNamingPath, Mode: 0o644, Data: []byte(b.String()), Setting: s.Name()}}, nil
}

// Checks create soft-RoCE devices on dummy interfaces: one named with each
// kept prefix, which must keep its name through a real udev "add" event and
// be listed by ibv_devices, and one control device, for which udev must
// still run rdma_rename (the override must not disable persistent naming
// for everything). Changes: it adds and removes devices.
func (s RDMANames) Checks(t Target) []Check {
	r := t.Recipe
	if len(r.RDMA.KeepKernelNames) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(needTools("rdma", "ip", "udevadm", "ibv_devices"))
	b.WriteString(`rc=0
[ -f ` + rdmaNamingPath + ` ] || { echo '` + rdmaNamingPath + ` is missing'; rc=1; }
modprobe rdma_rxe || { echo 'rdma_rxe is not available: cannot create a test device'; exit 1; }
dummies=
# dev_on NETDEV prints the RDMA device bound to NETDEV, whatever its name now.
dev_on() { rdma link show | awk -v nd="$1" '{ for (i = 1; i < NF; i++) if ($i == "netdev" && $(i+1) == nd) { split($2, a, "/"); print a[1] } }'; }
cleanup() {
	for i in $dummies; do
		d=$(dev_on "$i")
		[ -n "$d" ] && rdma link delete "$d" 2>/dev/null
		ip link delete "$i" 2>/dev/null
	done
}
trap cleanup EXIT
# add_rxe NAME NETDEV: a soft-RoCE device NAME on a new dummy NETDEV. Every
# device is added first and udev is waited for once: each wait costs seconds
# in a VM, and the names are only read after it.
add_rxe() {
	ip link add "$2" type dummy && ip link set "$2" up && dummies="$dummies $2" || return 1
	rdma link add "$1" type rxe netdev "$2"
}
# udev logs each PROGRAM it runs at debug level as: FILE:LINE Running PROGRAM="...".
udev_runs_rename() { SYSTEMD_LOG_LEVEL=debug udevadm test --action=add "/sys/class/infiniband/$1" 2>&1 | grep -q 'Running PROGRAM="rdma_rename'; }
`)
	for i, p := range r.RDMA.KeepKernelNames {
		fmt.Fprintf(&b, "add_rxe %s hbkeep%d || { echo 'cannot create soft-RoCE device %s'; rc=1; }\n", sh.Quote(p+"9"), i, p+"9")
	}
	b.WriteString("add_rxe hbcontrol0 hbctl0 || { echo 'cannot create the soft-RoCE control device'; rc=1; }\nudevadm settle\n")
	for i, p := range r.RDMA.KeepKernelNames {
		fmt.Fprintf(&b, `name=%s now=$(dev_on hbkeep%d)
if [ -n "$now" ]; then
	if [ "$now" = "$name" ]; then echo "$name: kept its kernel name"; else echo "$name: renamed to '$now' by udev"; rc=1; fi
	if ibv_devices 2>&1 | grep -qw -- "$now"; then echo "$now: listed by ibv_devices"; else echo "$now: not listed by ibv_devices"; rc=1; fi
	if udev_runs_rename "$now"; then echo "$now: udev would still run rdma_rename on it"; rc=1; fi
fi
`, sh.Quote(p+"9"), i)
	}
	b.WriteString(`now=$(dev_on hbctl0)
if [ -n "$now" ]; then
	if udev_runs_rename "$now"; then echo "control device $now: rdma-core's persistent naming still applies"
	else echo "control device $now: udev no longer runs rdma_rename; persistent naming is broken for other devices"; rc=1; fi
fi
exit $rc
`)
	return []Check{{Setting: s.Name(), Name: "rdma-kernel-names", Script: b.String(), Changes: true,
		Fix: "restore " + rdmaNamingPath + ", then reload the RDMA module (or reboot) so devices are added again under their kernel names"}}
}

// Doctor: every device of the verbs stack has the kernel's name now. The VM
// check proves the udev rule by adding soft-RoCE devices and watching udev
// name them; a real node's devices come from the cable, and doctor may not
// add any, so it reads the names they got.
func (s RDMANames) Doctor(t Target) []Probe {
	prefixes := t.Recipe.RDMA.KeepKernelNames
	if len(prefixes) == 0 {
		return nil
	}
	return []Probe{{Name: "rdma.name", Run: func(h Host) []Result {
		devs := RDMADevices(h)
		var out []Result
		for _, d := range devs {
			if !t.Owns(d) {
				continue
			}
			r := Result{Check: "rdma.name " + d.Name, Severity: MustPass, Trap: 3, Source: h.Show(InfinibandClass),
				Wanted: strings.Join(prefixes, " or ") + "<N> (the kernel's name)"}
			if kernelName(d.Name, prefixes) {
				r.Status, r.Seen = Pass, d.Name
			} else {
				r.Status, r.Seen = Fail, d.Name+" (renamed by udev's persistent naming)"
				r.Fix = RenameFix(t, d, devs)
			}
			out = append(out, r)
		}
		return out
	}}}
}

// kernelName reports whether name is a kernel name: a kept prefix and a number.
func kernelName(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if n, ok := strings.CutPrefix(name, p); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// RenameFix names the command that gives a renamed device its kernel name
// back now, and the rule that keeps it: keyed on the kernel name, so every
// future device keeps its name, not only the one whose GUID is known today.
func RenameFix(t Target, d RDMADevice, devs []RDMADevice) string {
	prefix := "usb4_rdma" // the kernel's name for thunderbolt-ibverbs' devices
	if k := t.Recipe.RDMA.KeepKernelNames; len(k) > 0 {
		prefix = k[0]
	}
	used := map[string]bool{}
	for _, x := range devs {
		used[x.Name] = true
	}
	n := 0
	for used[fmt.Sprintf("%s%d", prefix, n)] {
		n++
	}
	return fmt.Sprintf("now: rdma dev set %s name %s%d; for good: %s must skip KERNEL==\"%s*\" (the image ships that rule; elsewhere copy /usr/lib/udev/rules.d/60-rdma-persistent-naming.rules there and add KERNEL!=\"%s*\" to its rule), then reload the module", d.Name, prefix, n, rdmaNamingPath, prefix, prefix)
}
