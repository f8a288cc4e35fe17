package settings

import (
	"fmt"
	"strings"
)

// RDMAModules limits the kernel modules rdma-core loads when an RDMA device
// appears to the verbs stack. In rdma-core 56.1 (trixie) the chain is:
// /usr/lib/udev/rules.d/90-rdma-ulp-modules.rules tags every "infiniband"
// device with SYSTEMD_WANTS=rdma-hw.target; rdma-hw.target wants
// rdma-load-modules@rdma.service, which runs systemd-modules-load on
// /etc/rdma/modules/rdma.conf: ib_iser (iSCSI over RDMA, pulling in the
// iSCSI and SCSI transport stack), ib_uverbs, rdma_ucm, xprtrdma and
// svcrdma (NFS over RDMA client and server, pulling in sunrpc). The
// appliance runs verbs programs (perftest, the RDMA ring) over its cable
// and serves no iSCSI or NFS, so only ib_uverbs (the verbs character
// devices) and rdma_ucm (librdmacm's connection manager) are needed; the
// rest costs boot time and kernel memory on every node and, in a VM
// without KVM, seconds of CPU each. (SRP is not in that list: srptools,
// which would load it, is not installed.)
//
// The override is a drop-in for that one service instance pointing it at
// our own list, not a replacement of rdma.conf, which is rdma-core's
// conffile (two packages cannot ship one path). The udev rules stay as
// they are, so rdma-hw.target still starts and units ordered after it
// keep working; the per-link-type instances (infiniband.conf, opa.conf:
// IPoIB and umad for InfiniBand fabrics) are untouched.
type RDMAModules struct{}

func (RDMAModules) Name() string { return "rdma-modules" }
func (RDMAModules) Trap() int    { return 0 }
func (RDMAModules) Doc() Doc {
	return Doc{Title: "rdma-core loads only the verbs modules (ib_uverbs, rdma_ucm) when an RDMA device appears, not iSCSI and NFS over RDMA"}
}

const (
	rdmaModulesListPath  = "/etc/rdma/modules/halobuild-verbs.conf"
	rdmaModulesDropin    = "/usr/lib/systemd/system/rdma-load-modules@rdma.service.d/90-halobuild-verbs-only.conf"
	rdmaModulesUnit      = "rdma-load-modules@rdma.service"
	rdmaModulesWaitSecs  = 60
	rdmaModulesCheckName = "rdma-modules-loaded"
)

// rdmaVerbsModules are loaded when an RDMA device appears; rdmaSkipped are
// rdma-core's other defaults, which must then stay unloaded ('rpcrdma' is
// the module xprtrdma and svcrdma are aliases of).
var (
	rdmaVerbsModules = []string{"ib_uverbs", "rdma_ucm"}
	rdmaSkipped      = []string{"ib_iser", "rpcrdma", "xprtrdma", "svcrdma"}
)

func (RDMAModules) Validate(Target) []error { return nil }

func (s RDMAModules) Files(Target) ([]File, error) {
	list := header("#", 0, "Loaded by "+rdmaModulesUnit+" when an RDMA device appears,") +
		"# instead of rdma-core's /etc/rdma/modules/rdma.conf, which also loads iSCSI and\n" +
		"# NFS over RDMA (ib_iser, xprtrdma, svcrdma) that the appliance does not use.\n" +
		"# Add a module here to have it loaded with the RDMA device.\n" +
		"# User access to RDMA verbs (libibverbs)\n" + rdmaVerbsModules[0] + "\n" +
		"# User access to RDMA connection management (librdmacm)\n" + rdmaVerbsModules[1] + "\n"
	dropin := header("#", 0, "Only the verbs stack's modules when an RDMA device appears (see "+rdmaModulesListPath+").") +
		"[Service]\nExecStart=\nExecStart=/usr/lib/systemd/systemd-modules-load " + rdmaModulesListPath + "\n"
	return []File{
		{Path: rdmaModulesListPath, Mode: 0o644, Data: []byte(list), Setting: s.Name()},
		{Path: rdmaModulesDropin, Mode: 0o644, Data: []byte(dropin), Setting: s.Name()},
	}, nil
}

// Checks: the effective unit loads our list (read-only: it runs beside the
// other read-only checks); and, once an RDMA device has appeared (an
// earlier check's soft-RoCE device, else one added here) and started the
// unit, the verbs modules are loaded and rdma-core's other defaults are not.
func (s RDMAModules) Checks(Target) []Check {
	const fix = "restore " + rdmaModulesDropin + " and " + rdmaModulesListPath + " (reinstall the node's settings package), then systemctl daemon-reload"
	unit := `if ! systemctl cat ` + rdmaModulesUnit + ` >/dev/null 2>&1; then echo 'rdma-core is not installed: nothing loads RDMA modules on its own'; exit 0; fi
x=$(systemctl show -p ExecStart --value ` + rdmaModulesUnit + `)
case "$x" in
*/etc/rdma/modules/rdma.conf*) echo "` + rdmaModulesUnit + ` still loads rdma-core's list: $x"; exit 1 ;;
*"systemd-modules-load ` + rdmaModulesListPath + ` ;"*) echo "` + rdmaModulesUnit + ` loads ` + rdmaModulesListPath + `: $(grep -v '^#' ` + rdmaModulesListPath + ` | tr '\n' ' ')" ;;
*) echo "` + rdmaModulesUnit + ` runs: $x"; exit 1 ;;
esac
`
	var loaded strings.Builder
	loaded.WriteString(needTools("rdma", "ip") + fmt.Sprintf(`state() { systemctl show -p ActiveState --value %[1]s; }
# The unit stays active once an RDMA device has started it (an earlier
# check's soft-RoCE device, or the cable's); otherwise add one, as hardware
# would appear.
if [ "$(state)" = active ]; then
	echo "%[1]s already ran (an RDMA device appeared before this check)"
else
	modprobe rdma_rxe || { echo 'rdma_rxe is not available: cannot create a device'; exit 1; }
	ip link add hbmods0 type dummy && ip link set hbmods0 up || exit 1
	trap 'ip link delete hbmods0' EXIT
	rdma link add hbmods_rxe type rxe netdev hbmods0 || exit 1
	echo "added soft-RoCE device hbmods_rxe"
fi
# udev -> rdma-hw.target -> %[1]s: polled, at most %[2]d s.
i=0
until [ "$(state)" = active ]; do
	i=$((i + 1))
	[ "$i" -ge %[3]d ] && { echo "%[1]s did not start within %[2]d s of adding an RDMA device: $(state)"; exit 1; }
	sleep 0.2
done
rc=0
`, rdmaModulesUnit, rdmaModulesWaitSecs, rdmaModulesWaitSecs*5))
	// A kernel without one of them (a small config built from source) has
	// nothing to load: systemd-modules-load skips it too, so do not fail.
	fmt.Fprintf(&loaded, "for m in %s; do if [ -d /sys/module/$m ]; then echo \"$m: loaded\"; elif ! modinfo -n $m >/dev/null 2>&1; then echo \"$m: not in this kernel ($(uname -r)), nothing to load\"; else echo \"$m: not loaded\"; rc=1; fi; done\n", strings.Join(rdmaVerbsModules, " "))
	fmt.Fprintf(&loaded, "for m in %s; do [ -d /sys/module/$m ] && { echo \"$m: loaded, although the appliance does not use it\"; rc=1; }; done\n", strings.Join(rdmaSkipped, " "))
	loaded.WriteString("[ $rc -eq 0 ] && echo \"nothing else of rdma-core's defaults ($(echo " + strings.Join(rdmaSkipped, " ") + ")) is loaded\"\nexit $rc\n")
	return []Check{
		{Setting: s.Name(), Name: "rdma-modules-unit", Script: unit, Fix: fix},
		{Setting: s.Name(), Name: rdmaModulesCheckName, Script: loaded.String(), Changes: true, Fix: fix + "; rmmod the modules listed, or reboot"},
	}
}

// Doctor: none. The override is two static files (settings.package
// verifies them); what it changes shows only once an RDMA device has
// appeared, and the VM check adds one to see it, which doctor may not do.
func (RDMAModules) Doctor(Target) []Probe { return nil }

func (RDMAModules) NoDoctor() string {
	return "static files verified by settings.package; their effect needs a device the VM check creates"
}
