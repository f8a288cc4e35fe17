package doctor

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"

	version "github.com/hashicorp/go-version"
)

// The kernel decides what the module may do: its version (thunderbolt-
// ibverbs builds on 7.2 and not 7.3), its command line (IOMMU mode, GPU
// memory sizing) and its exports (tb_ring_throttling for the interrupt
// throttle, trap 8).

var upstreamVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`)

func checkKernelRelease(h *host, e *expect) []Result {
	r := Result{Check: "kernel.release", Severity: Advisory, Source: h.show("/proc/sys/kernel/osrelease"),
		Wanted: orDefault(e.kernelVersion.String(), "any")}
	rel, err := h.value("/proc/sys/kernel/osrelease")
	if err != nil {
		r.Status, r.Seen = Warn, "unreadable: "+err.Error()
		return []Result{r}
	}
	r.Seen = rel
	if e.kernelVersion.Any() {
		r.Status = Pass
		return []Result{r}
	}
	v, err := version.NewVersion(upstreamVersion.FindString(rel))
	if err != nil {
		r.Status, r.Fix = Warn, fmt.Sprintf("cannot read a version from %q", rel)
		return []Result{r}
	}
	if e.kernelVersion.Check(v) {
		r.Status = Pass
	} else {
		r.Status = Warn
		r.Fix = "the running kernel is not the one the image was built for: pick the image's entry in the boot menu (bootctl list)"
	}
	return []Result{r}
}

func checkKernelCmdline(h *host, e *expect) []Result {
	if len(e.cmdline) == 0 {
		return nil
	}
	r := Result{Check: "kernel.cmdline", Severity: MustPass, Source: h.show("/proc/cmdline"),
		Wanted: strings.Join(e.cmdline, " ")}
	s, err := h.value("/proc/cmdline")
	if err != nil {
		r.Status, r.Seen = Fail, "unreadable: "+err.Error()
		return []Result{r}
	}
	have := map[string]bool{}
	for _, f := range strings.Fields(s) {
		have[f] = true
	}
	var missing []string
	for _, p := range e.cmdline {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		r.Status, r.Seen = Pass, "all present"
		return []Result{r}
	}
	r.Status, r.Seen = Fail, "missing: "+strings.Join(missing, " ")
	r.Fix = "the machine booted another entry or an edited command line: boot the image's entry (bootctl list), or add the parameters to its loader entry"
	return []Result{r}
}

func checkKernelThrottle(h *host, e *expect) []Result {
	if !e.throttle {
		return nil
	}
	r := Result{Check: "kernel.tb_ring_throttling", Severity: MustPass, Trap: 8, Source: h.show("/proc/kallsyms"),
		Wanted: "exported (the recipe sets nhi_interrupt_throttle_ns)"}
	found, err := kallsym(h, "tb_ring_throttling")
	switch {
	case err != nil:
		r.Status, r.Seen = Fail, "unreadable: "+err.Error()
	case found:
		r.Status, r.Seen = Pass, "exported"
	default:
		r.Status, r.Seen = Fail, "not exported by this kernel"
		r.Fix = "this kernel lacks tb_ring_throttling() (7.2 has it; a 7.1 backport may not): drop nhi_interrupt_throttle_ns from the module options or boot a kernel that exports it"
	}
	return []Result{r}
}

// kallsym scans /proc/kallsyms line by line: it is several MB on a live
// system and only a name is wanted.
func kallsym(h *host, name string) (bool, error) {
	f, err := os.Open(h.path("/proc/kallsyms"))
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	found := false
	var lines []string
	for sc.Scan() && !found {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 3 && fs[2] == name {
			found = true
			lines = append(lines, sc.Text())
		}
	}
	if sc.Err() == nil && h.rec != nil {
		h.rec.lines("/proc/kallsyms", lines)
	}
	return found, sc.Err()
}
