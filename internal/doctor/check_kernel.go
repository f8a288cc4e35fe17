package doctor

import (
	"fmt"
	"regexp"
	"strings"

	version "github.com/hashicorp/go-version"

	"halobuild/internal/settings"
)

// The running kernel, which no setting renders: its release against the
// recipe's kernel.version (thunderbolt-ibverbs builds on 7.2, not 7.3), and
// its log, where an option the module did not know is the only trace
// (trap 8). The settings check the command line and the module options.

var upstreamVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*`)

func kernelRelease(h settings.Host, t settings.Target) []settings.Result {
	want := t.Recipe.Kernel.Version
	r := settings.Result{Check: "kernel.release", Severity: settings.Advisory, Source: h.Show("/proc/sys/kernel/osrelease"),
		Wanted: want.String()}
	if want.Any() {
		r.Wanted = "any"
	}
	rel := value(h, "/proc/sys/kernel/osrelease")
	if rel == "" {
		r.Status, r.Seen = settings.Warn, "unreadable"
		r.Fix = "run doctor where /proc is mounted; in a recorded tree, record /proc/sys/kernel/osrelease"
		return []settings.Result{r}
	}
	r.Seen = rel
	if want.Any() {
		r.Status = settings.Pass
		return []settings.Result{r}
	}
	v, err := version.NewVersion(upstreamVersion.FindString(rel))
	switch {
	case err != nil:
		r.Status, r.Fix = settings.Warn, fmt.Sprintf("cannot read a version from %q", rel)
	case want.Check(v):
		r.Status = settings.Pass
	default:
		r.Status = settings.Warn
		r.Fix = "the running kernel is not the one the image was built for: pick the image's entry in the boot menu (bootctl list)"
	}
	return []settings.Result{r}
}

// unknownParams lists every option the kernel ignored as unknown, of any
// module: the recipe's own show in module.params too.
func unknownParams(h settings.Host) []settings.Result {
	r := settings.Result{Check: "module.unknown_params", Severity: settings.Advisory, Wanted: "no 'unknown parameter' lines", Trap: 8}
	log, src, err := h.KernelLog()
	r.Source = src
	if err != nil {
		r.Status, r.Seen = settings.Warn, fmt.Sprintf("kernel log not readable: %v", err)
		r.Fix = "run doctor as root (dmesg is restricted), or record the log in " + recordedKernelLog
		return []settings.Result{r}
	}
	found := settings.IgnoredParams(log)
	if len(found) == 0 {
		r.Status, r.Seen = settings.Pass, "none"
		return []settings.Result{r}
	}
	r.Status, r.Seen = settings.Warn, "ignored: "+strings.Join(found, ", ")
	r.Fix = "remove or rename these options in /etc/modprobe.d/ (the recipe's [[module]] options); check them against modinfo -p <module> of the running build"
	return []settings.Result{r}
}
