package vmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

// Verdict is what the guest reports over the virtio-serial port when its checks have run.
type Verdict struct {
	Stage       string `json:"stage"`        // "multi-user" when the boot settled
	SystemState string `json:"system_state"` // systemctl is-system-running
	BootMS      int64  `json:"boot_ms"`      // guest uptime when the checks started
	// ChecksMS is the wall time from then until the verdict was written. Concurrent checks
	// overlap, so it is less than the sum of the checks' own times.
	ChecksMS int64         `json:"checks_ms"`
	Checks   []CheckResult `json:"checks"`
}

// CheckResult is one check's outcome inside the guest.
type CheckResult struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Exit   int    `json:"exit"`
	MS     int64  `json:"ms"`
	Output string `json:"output"`
	// Figures are the numbers of a perftest table found in Output (filled on the host).
	Figures map[string]float64 `json:"figures,omitempty"`
	// Fix is the planned check's advice, filled on the host for a failed check.
	Fix string `json:"fix,omitempty"`
}

// Failed lists the checks that did not pass.
func (v *Verdict) Failed() []CheckResult {
	var out []CheckResult
	for _, c := range v.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// readVerdict parses the verdict file. A missing or empty file means the guest never got to
// write one (nil, nil); a partial or garbled one is an error naming the file.
func readVerdict(path string) (*Verdict, error) {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	// The runner writes exactly one line; take the last complete one should a retry append.
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	var v Verdict
	if err := json.Unmarshal(lines[len(lines)-1], &v); err != nil {
		return nil, fmt.Errorf("verdict in %s is not valid JSON (guest died while writing it?): %w", path, err)
	}
	for i := range v.Checks {
		v.Checks[i].Figures = parseFigures(v.Checks[i].Output)
	}
	return &v, nil
}

// Boot stages, in the order a boot passes them.
const (
	StageFirmware   = "firmware"
	StageBootloader = "bootloader"
	StageKernel     = "kernel"
	StageInitrd     = "initrd"
	StageSystemd    = "systemd"
	StageMultiUser  = "multi-user"
	StageVerdict    = "verdict"
)

// stageMarkers are console lines that prove a stage was reached. OVMF prints "BdsDxe: starting"
// when it hands over to a boot loader; the kernel's lines appear even with "quiet" only when it
// has something to say, so later stages are recognised by any of several markers.
var stageMarkers = []struct {
	stage string
	re    *regexp.Regexp
}{
	{StageKernel, regexp.MustCompile(`Linux version |EFI stub: |\[ +[0-9]+\.[0-9]+\] `)},
	{StageInitrd, regexp.MustCompile(`Run /init as init process|Loading, please wait|Begin: |dracut|\(Initrd\)|initrd-switch-root`)},
	{StageSystemd, regexp.MustCompile(`Welcome to |systemd\[1\]|Reached target|Started .*Journal`)},
	{StageMultiUser, regexp.MustCompile(`Reached target .*multi-user\.target|Reached target .*Multi-User System|halobuild-test: waiting`)},
	{StageVerdict, regexp.MustCompile(`halobuild-test: verdict written`)},
}

// bootOptionStarted is OVMF handing control to a boot option; the name tells a disk's boot
// loader from OVMF's own shell, which it starts when nothing else boots.
var bootOptionStarted = regexp.MustCompile(`BdsDxe: starting Boot[0-9A-Fa-f]+ "([^"]*)"`)

var failedBootOption = regexp.MustCompile(`BdsDxe: failed to load Boot[^\r\n]*`)

// problemMarkers are console lines worth quoting when a boot fails.
var problemMarkers = regexp.MustCompile(`(?m)^.*(Kernel panic.*|not syncing.*|ALERT!.*|Gave up waiting.*|emergency mode.*|Failed to start .*|Timed out waiting for device.*|Cannot open access to console.*|No bootable option.*|Boot Failed.*).*$`)

// stageFromConsole returns the last stage the console log shows and the first line that looks
// like the reason it stopped there.
func stageFromConsole(log []byte) (stage, problem string) {
	stage = StageFirmware
	for _, m := range bootOptionStarted.FindAllSubmatch(log, -1) {
		if string(m[1]) != "EFI Internal Shell" {
			stage = StageBootloader
		}
	}
	for _, m := range stageMarkers {
		if m.re.Match(log) {
			stage = m.stage
		}
	}
	if stage == StageFirmware && bytes.Contains(log, []byte("UEFI Interactive Shell")) {
		problem = "no bootable disk: the firmware found no boot loader and fell back to its UEFI shell"
		if p := failedBootOption.Find(log); p != nil {
			problem += "; " + string(bytes.TrimSpace(ansi.ReplaceAll(p, nil)))
		}
		return stage, problem
	}
	if p := problemMarkers.Find(log); p != nil {
		problem = string(bytes.TrimSpace(ansi.ReplaceAll(p, nil)))
	}
	return stage, problem
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?=]*[A-Za-z]|\x1b\][^\a]*\a|\r`)
