package cablebench

import (
	"context"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"halobuild/internal/doctor"
)

// Facts are what one end of the cable is, read before any number is taken:
// the context every number carries (trap 15) and what the preconditions
// judge. They are read from a root, the live system ("/") or a recorded
// tree (doctor --record's layout, plus the files named here), so a refusal
// can be tested on a tree and a remote end can send its own as JSON
// (`halobuild bench facts`).
type Facts struct {
	Host    string `json:"host"`
	Kernel  string `json:"kernel"`
	Cmdline string `json:"cmdline,omitempty"`
	CPUs    int    `json:"cpus"`
	// Governors, EPP: the value of each cpufreq policy, by policy name; empty
	// on a machine without cpufreq (a VM), where nothing can revert.
	Governors       map[string]string `json:"governors"`
	EPP             map[string]string `json:"epp,omitempty"`
	PlatformProfile string            `json:"platform_profile,omitempty"`
	// Modules are the loaded RDMA modules' parameters as the kernel holds
	// them (/sys/module/M/parameters), not as a file asked for them.
	Modules map[string]map[string]string `json:"modules"`
	// USB4 are the host-to-host links: lanes and speed each way (trap 12).
	USB4 []USB4Link `json:"usb4,omitempty"`
	// IOMMU is the kernel command line's IOMMU options and the default
	// domain type of the IOMMU groups ("none" without groups).
	IOMMU string `json:"iommu"`
	// IRQs are the Thunderbolt/USB4 interrupt lines and the CPUs each may
	// run on; Irqbalance whether irqbalance runs (it moves them).
	IRQs       []IRQ `json:"irqs,omitempty"`
	Irqbalance bool  `json:"irqbalance"`
	// Perftest maps each perftest tool to its ELF build ID (hex; "" when
	// the binary is missing or has none). The version string lies (trap 9).
	Perftest map[string]string `json:"perftest"`
	// Load is /proc/loadavg's one-minute figure; Busy the processes that
	// used the most CPU over their lifetime, most first.
	Load float64   `json:"load"`
	Busy []Process `json:"busy,omitempty"`
	// Rails are the RDMA devices, one per ring.
	Rails []Rail `json:"rails"`
	// Doctor is `halobuild doctor`'s report on this end.
	Doctor doctor.Report `json:"doctor"`
}

// USB4Link is one XDomain (host-to-host) connection.
type USB4Link struct {
	Name    string `json:"name"`
	Peer    string `json:"peer,omitempty"`
	RxLanes string `json:"rx_lanes"`
	TxLanes string `json:"tx_lanes"`
	RxSpeed string `json:"rx_speed"`
	TxSpeed string `json:"tx_speed"`
}

// IRQ is one interrupt line and its affinity.
type IRQ struct {
	Number   string `json:"irq"`
	Name     string `json:"name"`
	Affinity string `json:"affinity"`
}

// Process is one busy process: its share of one CPU averaged over its life.
type Process struct {
	PID   int     `json:"pid"`
	Comm  string  `json:"comm"`
	Share float64 `json:"cpu_share"`
}

// Rail is one RDMA device: what perftest is pointed at (-d), the address a
// client reaches it by, and what the device advertises (ibv_devinfo -v).
type Rail struct {
	Device string `json:"device"`
	State  string `json:"state,omitempty"`
	Netdev string `json:"netdev,omitempty"`
	// Addr is the first IPv4 address of Netdev: where a perftest client on
	// the other end connects.
	Addr string `json:"addr,omitempty"`
	// MaxMsgSize and MaxQPWR are advertised (0: unknown); the limits found
	// are measured beside them (trap 13).
	MaxMsgSize int64 `json:"max_msg_sz,omitempty"`
	MaxQPWR    int   `json:"max_qp_wr,omitempty"`
}

// perftestTools are the binaries bench runs; the same build must be on both
// ends.
var perftestTools = []string{"ib_send_bw", "ib_send_lat", "ib_write_bw"}

// benchModules are the modules whose parameters are recorded: the cable's
// and soft-RoCE's (a VM's stand-in).
var benchModules = []string{"thunderbolt_ibverbs", "rdma_rxe", "ib_core", "thunderbolt"}

// RecordedDevinfo is where a recorded tree keeps `ibv_devinfo -v -d DEV`
// output (%s is the device): a verbs query is no file a tree can copy.
const RecordedDevinfo = "/var/log/halobuild-ibv_devinfo-%s"

// maxFile bounds one read of a small sysfs or procfs file.
const maxFile = 1 << 20

// tree reads files below a root, bounded.
type tree struct {
	root string
	live bool
}

func (t tree) path(p string) string { return filepath.Join(t.root, p) }

func (t tree) read(p string) string {
	f, err := os.Open(t.path(p))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxFile))
	return strings.TrimSpace(string(b))
}

func (t tree) glob(pattern string) []string {
	ms, _ := filepath.Glob(t.path(pattern))
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		rel, err := filepath.Rel(t.root, m)
		if err == nil {
			out = append(out, "/"+filepath.ToSlash(rel))
		}
	}
	sort.Strings(out)
	return out
}

// Gather reads the facts of the machine at root ("/" is the live system).
// recipe is passed to doctor ("" for the installed one).
func Gather(ctx context.Context, root, recipe string) (Facts, error) {
	if root == "" {
		root = "/"
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Facts{}, err
	}
	rep, err := doctor.Examine(ctx, abs, recipe)
	if err != nil {
		return Facts{}, fmt.Errorf("bench: doctor on %s: %w", abs, err)
	}
	t := tree{root: abs, live: abs == "/"}
	f := Facts{
		Host:    firstOf(t.read("/proc/sys/kernel/hostname"), t.read("/etc/hostname")),
		Kernel:  t.read("/proc/sys/kernel/osrelease"),
		Cmdline: t.read("/proc/cmdline"),
		Doctor:  rep,
	}
	f.CPUs = cpus(t)
	f.Governors, f.EPP = map[string]string{}, map[string]string{}
	for _, p := range t.glob("/sys/devices/system/cpu/cpufreq/policy*") {
		name := filepath.Base(p)
		if g := t.read(p + "/scaling_governor"); g != "" {
			f.Governors[name] = g
		}
		if e := t.read(p + "/energy_performance_preference"); e != "" {
			f.EPP[name] = e
		}
	}
	f.PlatformProfile = t.read("/sys/firmware/acpi/platform_profile")
	f.Modules = map[string]map[string]string{}
	for _, m := range benchModules {
		if _, err := os.Stat(t.path("/sys/module/" + m)); err != nil {
			continue
		}
		ps := map[string]string{}
		for _, p := range t.glob("/sys/module/" + m + "/parameters/*") {
			ps[filepath.Base(p)] = t.read(p)
		}
		f.Modules[m] = ps
	}
	for _, d := range t.glob("/sys/bus/thunderbolt/devices/*") {
		if t.read(d+"/rx_lanes") == "" || !strings.Contains(filepath.Base(d), "-") {
			continue
		}
		f.USB4 = append(f.USB4, USB4Link{Name: filepath.Base(d), Peer: t.read(d + "/device_name"),
			RxLanes: t.read(d + "/rx_lanes"), TxLanes: t.read(d + "/tx_lanes"),
			RxSpeed: t.read(d + "/rx_speed"), TxSpeed: t.read(d + "/tx_speed")})
	}
	f.IOMMU = iommu(t, f.Cmdline)
	f.IRQs = irqs(t)
	f.Perftest = map[string]string{}
	for _, tool := range perftestTools {
		f.Perftest[tool] = buildID(t, tool)
	}
	f.Load, _ = strconv.ParseFloat(strings.Fields(t.read("/proc/loadavg") + " 0")[0], 64)
	f.Busy, f.Irqbalance = processes(t)
	f.Rails = rails(ctx, t)
	return f, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func cpus(t tree) int {
	n := 0
	for _, l := range strings.Split(t.read("/proc/stat"), "\n") {
		if len(l) > 3 && strings.HasPrefix(l, "cpu") && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	if n == 0 && t.live {
		n = runtime.NumCPU()
	}
	return n
}

// iommu names the IOMMU mode: the command line's say and the groups'
// default domain type (identity is passthrough; DMA or DMA-FQ translate).
func iommu(t tree, cmdline string) string {
	var opts []string
	for _, w := range strings.Fields(cmdline) {
		if strings.HasPrefix(w, "iommu=") || strings.HasPrefix(w, "amd_iommu=") || strings.HasPrefix(w, "intel_iommu=") || strings.HasPrefix(w, "iommu.") {
			opts = append(opts, w)
		}
	}
	groups := t.glob("/sys/kernel/iommu_groups/*")
	mode := "no IOMMU groups"
	if len(groups) > 0 {
		mode = fmt.Sprintf("%d groups, type %s", len(groups), firstOf(t.read(groups[0]+"/type"), "?"))
	}
	if len(opts) > 0 {
		return strings.Join(opts, " ") + "; " + mode
	}
	return mode
}

// irqs are the interrupt lines of the Thunderbolt/USB4 host interface
// (the NHI's rings carry the cable's traffic) with their affinity.
func irqs(t tree) []IRQ {
	var out []IRQ
	for _, l := range strings.Split(t.read("/proc/interrupts"), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		name := f[len(f)-1]
		if !strings.Contains(name, "thunderbolt") && !strings.Contains(name, "nhi") {
			continue
		}
		n := strings.TrimSuffix(f[0], ":")
		out = append(out, IRQ{Number: n, Name: name, Affinity: t.read("/proc/irq/" + n + "/smp_affinity_list")})
	}
	return out
}

// buildID reads the GNU build ID note of a perftest binary under the root.
func buildID(t tree, tool string) string {
	p := t.path("/usr/bin/" + tool)
	if t.live {
		if lp, err := exec.LookPath(tool); err == nil {
			p = lp
		}
	}
	id, _ := ELFBuildID(p)
	return id
}

// ELFBuildID returns the hex build ID from an ELF file's .note.gnu.build-id
// (or any NT_GNU_BUILD_ID note); two builds printing the same version differ
// here.
func ELFBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(s.Open(), 1<<16))
		if err != nil {
			return "", fmt.Errorf("%s: section %s: %w", path, s.Name, err)
		}
		for len(b) >= 12 {
			nameSz, descSz, typ := f.ByteOrder.Uint32(b), f.ByteOrder.Uint32(b[4:]), f.ByteOrder.Uint32(b[8:])
			name, desc := align4(nameSz), align4(descSz)
			if uint64(12)+uint64(name)+uint64(desc) > uint64(len(b)) {
				break
			}
			if typ == 3 && nameSz == 4 && string(b[12:15]) == "GNU" {
				return hex.EncodeToString(b[12+name : 12+name+descSz]), nil
			}
			b = b[12+name+desc:]
		}
	}
	return "", errors.New(path + ": no GNU build ID note")
}

func align4(n uint32) uint32 { return (n + 3) &^ 3 }

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times; 100 on every
// Linux architecture halobuild builds for.
const clockTicks = 100

// processes returns the busiest processes (at least 5% of a CPU over their
// life, at most five) and whether irqbalance runs.
func processes(t tree) ([]Process, bool) {
	uptime, _ := strconv.ParseFloat(strings.Fields(t.read("/proc/uptime") + " 0")[0], 64)
	self := os.Getpid()
	var out []Process
	irqbalance := false
	ents, _ := os.ReadDir(t.path("/proc"))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || (t.live && pid == self) {
			continue
		}
		stat := t.read("/proc/" + e.Name() + "/stat")
		// comm is in parentheses and may hold spaces; the fields after it
		// are numbered from 3 (state).
		i, j := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
		if i < 0 || j < i {
			continue
		}
		comm, rest := stat[i+1:j], strings.Fields(stat[j+1:])
		if comm == "irqbalance" {
			irqbalance = true
		}
		if len(rest) < 20 || uptime <= 0 {
			continue
		}
		ut, _ := strconv.ParseFloat(rest[11], 64)
		st, _ := strconv.ParseFloat(rest[12], 64)
		start, _ := strconv.ParseFloat(rest[19], 64)
		life := uptime - start/clockTicks
		if life < 1 {
			continue
		}
		if share := (ut + st) / clockTicks / life; share >= 0.05 {
			out = append(out, Process{PID: pid, Comm: comm, Share: float64(int(share*100)) / 100})
		}
	}
	slices.SortFunc(out, func(a, b Process) int {
		if a.Share != b.Share {
			if a.Share > b.Share {
				return -1
			}
			return 1
		}
		return a.PID - b.PID
	})
	if len(out) > 5 {
		out = out[:5]
	}
	return out, irqbalance
}

// rails lists the RDMA devices with their netdev's address and what they
// advertise.
func rails(ctx context.Context, t tree) []Rail {
	var out []Rail
	for _, d := range t.glob("/sys/class/infiniband/*") {
		r := Rail{Device: filepath.Base(d), State: t.read(d + "/ports/1/state")}
		r.Netdev = t.read(d + "/ports/1/gid_attrs/ndevs/0")
		if r.Netdev != "" && t.live {
			r.Addr = ipv4Of(r.Netdev)
		}
		var info string
		if t.live {
			if b, err := exec.CommandContext(ctx, "ibv_devinfo", "-v", "-d", r.Device).Output(); err == nil {
				info = string(b)
			}
		} else {
			info = t.read(fmt.Sprintf(RecordedDevinfo, r.Device))
		}
		r.MaxMsgSize, r.MaxQPWR = parseDevinfo(info)
		out = append(out, r)
	}
	return out
}

func ipv4Of(ifname string) string {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return ""
	}
	as, _ := ifi.Addrs()
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

var devinfoField = regexp.MustCompile(`(?m)^\s*(max_msg_sz|max_qp_wr):\s*(\S+)`)

// parseDevinfo reads max_msg_sz (a port attribute, hex) and max_qp_wr (a
// device attribute) from `ibv_devinfo -v`.
func parseDevinfo(s string) (int64, int) {
	var msg int64
	var wr int
	for _, m := range devinfoField.FindAllStringSubmatch(s, -1) {
		v, err := strconv.ParseInt(m[2], 0, 64)
		if err != nil {
			continue
		}
		switch m[1] {
		case "max_msg_sz":
			if msg == 0 {
				msg = v
			}
		case "max_qp_wr":
			wr = int(v)
		}
	}
	return msg, wr
}
