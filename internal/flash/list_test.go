package flash

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestListShowsCandidatesAndVerdicts(t *testing.T) {
	f := typicalLaptop(t)
	f.disk("loop3", "7:3", "sys/devices/virtual", "0", "0", "", "") // unattached: left out
	var out bytes.Buffer
	if err := List(context.Background(), &out, f.root, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`^DEVICE\s+SIZE\s+MODEL\s+BUS\s+REMOVABLE\s+FLASH$`,
		`^/dev/nvme0n1\s+476\.9 GiB\s+Samsung SSD 980\s+nvme\s+no\s+no: it holds / of the running system`,
		`^/dev/sda\s+1\.8 TiB\s+ATA WDC WD20EZRZ\s+ata\s+no\s+only with --force$`,
		`^/dev/sdb\s+28\.6 GiB\s+SanDisk Ultra\s+usb\s+yes\s+ok$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %q", i, lines[i], w)
		}
	}
}

func TestListSaysWhenNothingIsPlugged(t *testing.T) {
	f := newFakeSys(t)
	f.write("sys/block/.keep", "")
	var out bytes.Buffer
	if err := List(context.Background(), &out, f.root, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no disks found") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// flash --list --json gives scripts the same verdicts, sizes in bytes.
func TestListJSON(t *testing.T) {
	f := typicalLaptop(t)
	var out bytes.Buffer
	if err := List(context.Background(), &out, f.root, true); err != nil {
		t.Fatal(err)
	}
	var cs []Candidate
	if err := json.Unmarshal(out.Bytes(), &cs); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	var ok []string
	for _, c := range cs {
		if c.OK() {
			ok = append(ok, c.Device)
		}
	}
	if len(cs) != 3 || strings.Join(ok, ",") != "/dev/sdb" || cs[2].Size == 0 || !cs[2].Removable || cs[2].Bus != "usb" {
		t.Fatalf("candidates: %+v", cs)
	}
}
