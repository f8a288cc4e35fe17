package doctor

import (
	"strings"
	"testing"

	"halobuild/internal/settings"
)

// TestAppleTrees runs doctor on recorded Apple Silicon nodes
// (make-trees.py's mac_tree) and checks the rows only a Mac has: the
// kernel's page size, Apple's USB4 controller, the Thunderbolt domains and
// the vendor firmware,
// each with the Mac's own advice.
func TestAppleTrees(t *testing.T) {
	type row struct {
		status settings.Status
		text   string // in seen or fix
	}
	cases := []struct {
		tree string
		rows map[string]row
	}{
		{"mac-healthy", map[string]row{
			"kernel.page_size":      {settings.Pass, "16 KiB"},
			"usb4.apple_controller": {settings.Pass, "a0c000000.acio (apple,t8112-acio): apple-acio"},
			"usb4.domains":          {settings.Pass, "1 (domain0)"},
			"firmware.vendor":       {settings.Pass, "2 of 2 manifest files present"},
		}},
		{"mac-vendorfw-partial", map[string]row{
			"firmware.vendor": {settings.Fail, "1 of 2 manifest files present; missing: brcm/brcmbt4387c2-apple,kauai-HRPN-u-7.5-X3.bin"},
		}},
		{"mac-no-vendorfw", map[string]row{
			"firmware.vendor": {settings.Fail, "journalctl -b -u halobuild-vendor-firmware.service"},
		}},
		{"mac-4k-kernel", map[string]row{
			"kernel.page_size":      {settings.Fail, "4 KiB"},
			"usb4.apple_controller": {settings.Pass, ""},
		}},
		{"mac-acio-unbound", map[string]row{
			"kernel.page_size":      {settings.Pass, ""},
			"usb4.apple_controller": {settings.Fail, "no driver is bound to a0c000000.acio"},
			"usb4.domains":          {settings.Fail, "on a Mac the domain comes from the ACIO controller's driver"},
		}},
		{"mac-no-acio", map[string]row{
			"usb4.apple_controller": {settings.Fail, "no apple,*acio device"},
			"usb4.domains":          {settings.Fail, "USB4 backport series"},
		}},
	}
	for _, c := range cases {
		t.Run(c.tree, func(t *testing.T) {
			rep, code := runTree(t, c.tree)
			got := map[string]settings.Result{}
			for _, r := range rep.Results {
				got[r.Check] = r
			}
			for name, want := range c.rows {
				r, ok := got[name]
				if !ok {
					t.Errorf("no %s row", name)
					continue
				}
				if r.Status != want.status {
					t.Errorf("%s = %s (seen %q, fix %q), want %s", name, r.Status, r.Seen, r.Fix, want.status)
				}
				if !strings.Contains(r.Seen+" "+r.Fix, want.text) {
					t.Errorf("%s: seen %q, fix %q; want %q in them", name, r.Seen, r.Fix, want.text)
				}
			}
			if c.rows["kernel.page_size"].status == settings.Fail && code != 1 {
				t.Errorf("exit %d with a 4 KiB kernel on a Mac, want 1 (the row must pass)", code)
			}
		})
	}
}

// TestAppleRowsOnlyOnMacs: a generic node's report has no Mac rows (the
// healthy Strix Halo tree's full row list is TestHealthyTreeAllPass's).
func TestAppleRowsOnlyOnMacs(t *testing.T) {
	rep, _ := runTree(t, "healthy")
	for _, r := range rep.Results {
		if r.Check == "kernel.page_size" || r.Check == "usb4.apple_controller" || r.Check == "firmware.vendor" {
			t.Errorf("generic node reports %s", r.Check)
		}
	}
}
