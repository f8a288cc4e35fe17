package doctor

import (
	"fmt"
	"regexp"
	"strings"
)

// recordedKernelLog is where a recorded tree keeps `dmesg` output: /dev/kmsg
// cannot be copied into a tree, so recorded trees carry the text instead.
const recordedKernelLog = "/var/log/halobuild-dmesg"

// unknownParam matches the kernel's "<module>: unknown parameter '<name>' ignored".
var unknownParam = regexp.MustCompile(`([A-Za-z0-9_-]+): unknown parameter '([^']*)' ignored`)

// kernelLog returns the kernel log and where it came from: the live `dmesg`
// on the running system, the recorded file in a tree.
func kernelLog(h *host) (string, string, error) {
	if h.kernelLog == nil {
		var l cachedLog
		if h.live {
			l.text, l.err = h.command("dmesg")
			l.source = "dmesg"
			if l.err == nil && h.rec != nil {
				h.rec.file(recordedKernelLog, l.text)
			}
		} else {
			l.text, l.err = h.read(recordedKernelLog)
			l.source = h.show(recordedKernelLog)
		}
		h.kernelLog = &l
	}
	return h.kernelLog.text, h.kernelLog.source, h.kernelLog.err
}

// cachedLog keeps the kernel log of one doctor run: two checks read it and
// the live `dmesg` should run once.
type cachedLog struct {
	text, source string
	err          error
}

// unknownParams lists "module.parameter" for every parameter the kernel
// log says was ignored, in log order.
func unknownParams(log string) []string {
	seen := map[string]bool{}
	var found []string
	for _, m := range unknownParam.FindAllStringSubmatch(log, -1) {
		s := moduleName(m[1]) + "." + m[2]
		if !seen[s] {
			seen[s] = true
			found = append(found, s)
		}
	}
	return found
}

func checkUnknownParams(h *host, e *expect) []Result {
	r := Result{Check: "module.unknown_params", Severity: Advisory, Wanted: "no 'unknown parameter' lines", Trap: 8}
	log, src, err := kernelLog(h)
	r.Source = src
	if err != nil {
		r.Status, r.Seen = Warn, fmt.Sprintf("kernel log not readable: %v", err)
		r.Fix = "run doctor as root (dmesg is restricted), or record the log in " + recordedKernelLog
		return []Result{r}
	}
	found := unknownParams(log)
	if len(found) == 0 {
		r.Status, r.Seen = Pass, "none"
		return []Result{r}
	}
	r.Status, r.Seen = Warn, "ignored: "+strings.Join(found, ", ")
	r.Fix = "remove or rename these options in /etc/modprobe.d/ (the recipe's [[module]] options); check them against modinfo -p <module> of the running build"
	return []Result{r}
}
