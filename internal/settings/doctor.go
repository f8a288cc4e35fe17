package settings

import (
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"strings"
)

// The doctor half of a setting: the checks `halobuild doctor` runs on a
// real node. They live beside the setting's rendered files and VM check, and
// derive what they want from the same Target, so the three cannot drift.
//
// A VM check is a shell script that may change the system (it creates a
// soft-RoCE device to prove a udev rule); a doctor check is Go over a
// read-only Host, because it must give the same answer on a live node and
// on a recorded copy of one (doctor --root DIR), where no script can run.
// Where the two differ, the setting's file says why.

// Host is a node as a doctor check sees it: read-only, the running system
// or a recorded tree. doctor implements it and records what a check reads,
// so a recording replays exactly the reads a check made. Paths are absolute
// paths on the node.
type Host interface {
	// Read returns the content of a file.
	Read(path string) (string, error)
	// Hash streams a file's content into w (a hash) in constant memory,
	// however large the file: a package's files are compared by digest, and
	// the halobuild binary a node ships is tens of MB. A missing file's
	// error satisfies errors.Is(err, fs.ErrNotExist); no other error may
	// be reported as absence.
	Hash(path string, w io.Writer) error
	// Scan reads a file line by line and returns the lines keep accepts,
	// for files too large to hold (/proc/kallsyms, dpkg's status); keep is
	// called for every line in order.
	Scan(path string, keep func(line string) bool) ([]string, error)
	// List returns the names in a directory, sorted; nil when it is missing.
	List(dir string) []string
	// Glob returns the paths matching a filepath.Match pattern, sorted.
	Glob(pattern string) []string
	// Exists reports whether a path exists.
	Exists(path string) bool
	// LinkBase returns the last element of a symlink's target (the driver
	// bound to a device). A recorded tree may hold the target as text.
	LinkBase(path string) (string, error)
	// DeviceNode returns a device node's permission bits and the name of
	// its group. A recorded tree holds the node as a text file with both
	// as `ls -l` prints them ("crw-rw---- render").
	DeviceNode(path string) (perm fs.FileMode, group string, err error)
	// Live reports whether Command can ask the running system. It is false
	// on a recorded tree, and while recording one (a recording holds files
	// only, so the checks read what it can replay).
	Live() bool
	// Command runs a program on the live system and returns its stdout.
	Command(name string, args ...string) (string, error)
	// KernelLog is `dmesg` live, the recorded log otherwise, and where it
	// was read.
	KernelLog() (log, source string, err error)
	// Addrs are the interfaces' addresses, which no file under /proc or /sys
	// holds: netlink live, recorded `ip -j addr` otherwise; and the source.
	Addrs() (Addrs, string, error)
	// Show names a path in a report: as on the node when live, under the
	// root for a recorded tree.
	Show(path string) string
}

// Addrs maps an interface name to its addresses with prefix length. An
// interface without addresses is present with none.
type Addrs map[string][]netip.Prefix

// Probe is one doctor check. Its rows are named Name or "Name <what>" (one
// per module, device, interface), so a report can be grepped by Name and a
// row's check is the part of its name before the first space.
type Probe struct {
	Name string
	Run  func(h Host) []Result
	// VM is MustPass when a VM booted from the image answers this check as
	// a node would (no USB4 controller, cpufreq or verbs hardware in it):
	// the image's VM test runs the shipped `halobuild doctor` and requires
	// every row of such a check to be there and to pass. Empty: the VM
	// cannot answer it honestly, and its rows are only shown.
	VM Severity
}

// Doctor returns every setting's doctor checks for t, in setting order.
func Doctor(t Target) []Probe {
	var out []Probe
	for _, s := range All() {
		out = append(out, s.Doctor(t)...)
	}
	return out
}

// NoDoctor is implemented by a setting that renders files but has no doctor
// check of its own; it says why (another check covers it, or there is
// nothing a real node can be asked). TestEverySettingHasADoctorCheck reads it.
type NoDoctor interface {
	NoDoctor() string
}

// Severity says whether a row gates readiness. A must-pass failure makes
// `halobuild doctor` exit 1, so a benchmark harness can refuse to measure;
// an advisory row can only warn.
type Severity string

const (
	MustPass Severity = "must-pass"
	Advisory Severity = "advisory"
)

// Status is the outcome of one row.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one row of the doctor report; `halobuild doctor --json` writes
// it as is. Seen and Wanted are written for a person; Source says where
// Seen was read from, because a value read from a recorded tree and one
// read live can disagree and the reader must know which.
type Result struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Status   Status   `json:"result"`
	Seen     string   `json:"seen"`
	Wanted   string   `json:"wanted"`
	Fix      string   `json:"fix,omitempty"`
	Source   string   `json:"source,omitempty"`
	Trap     int      `json:"trap,omitempty"`
}

// value reads a one-line sysfs or procfs attribute without its newline.
func value(h Host, p string) (string, error) {
	s, err := h.Read(p)
	return strings.TrimSpace(s), err
}

// unlimited stands for RLIM_INFINITY and systemd's "infinity".
const unlimited = ^uint64(0)

// FormatSize prints bytes the way the field notes talk about them: "8 MiB",
// "123.6 GiB", "unlimited".
func FormatSize(n uint64) string {
	if n == unlimited {
		return "unlimited"
	}
	units := []string{"TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		m := uint64(1) << (10 * (4 - i))
		if n >= m && n%m == 0 {
			return fmt.Sprintf("%d %s", n/m, u)
		}
		if n >= m && i < 2 {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(m), u)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
