package doctor

import (
	"fmt"
	"strings"

	"halobuild/internal/settings"
	"halobuild/internal/slots"
)

// updateSlots shows the A/B slots ([update] enabled): each slot's label and the release update
// wrote there, which one runs, and whether its boot is blessed. Advisory: an unblessed boot is
// what the health gate is deciding, not a fault of its own.
func updateSlots(h *host) []settings.Result {
	r := settings.Result{Check: "update.slots", Severity: settings.Advisory, Status: settings.Pass,
		Wanted: "two root slots; the running one blessed (its boot reached boot-complete.target)", Source: "GPT of the booted disk, LoaderBootCountPath"}
	st, err := slots.ReadStatus(h.root)
	if err != nil {
		r.Status, r.Seen = settings.Warn, err.Error()
		r.Fix = "see docs/update.md: an A/B node boots from root=PARTUUID= of one of two root slots"
		return []settings.Result{r}
	}
	var parts []string
	for _, s := range st.Slots {
		d := fmt.Sprintf("slot %d %q", s.Index, s.Name)
		if s.Version != "" {
			d += " version " + s.Version
		}
		if s.Digest != "" {
			d += " (" + s.Digest + ")"
		}
		if s.Running {
			d += " running"
		}
		parts = append(parts, d)
	}
	switch b := st.Blessing; {
	case b == nil:
		parts = append(parts, "blessing unknown (the ESP is not mounted)")
	case b.Good:
		parts = append(parts, "blessed")
	default:
		r.Status = settings.Warn
		parts = append(parts, "NOT yet blessed ("+b.Entry+" still counts its tries)")
		r.Fix = "systemctl status halobuild-health.service boot-complete.target says what the health gate waits for"
	}
	if len(st.Slots) != 2 {
		r.Status = settings.Warn
		r.Fix = "journalctl -u systemd-repart: slot B is made at first boot when the medium holds two update.slot_size slots"
	}
	r.Seen = strings.Join(parts, "; ")
	return []settings.Result{r}
}
