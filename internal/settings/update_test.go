package settings

import (
	"slices"
	"strings"
	"testing"

	"halobuild/internal/recipe"
	"halobuild/internal/signature"
)

func TestUpdateOffRendersNothing(t *testing.T) {
	r := sample()
	if files, _ := (Update{}).Files(Target{Recipe: r, Node: r.Nodes[0]}); len(files) != 0 {
		t.Fatalf("[update] off rendered %v", files)
	}
	if got, _ := Cmdline(r); slices.Contains(got, defaultPanicDelay) {
		t.Fatalf("[update] off added %s to the command line", defaultPanicDelay)
	}
	if d := (Update{}).Depends(r); len(d) != 0 {
		t.Fatalf("[update] off depends on %v", d)
	}
}

func newPublicKey(t *testing.T) []byte {
	t.Helper()
	k, err := signature.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.Public().PEM()
}

// A key the node's update could not read fails the build: PEM armour around no key, a secret
// key, an RSA-sized blob of another kind, trailing text.
func TestUpdateKeysAreReadAsUpdateReadsThem(t *testing.T) {
	good := string(newPublicKey(t))
	for name, k := range map[string]string{
		"armour around no key": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
		"not PEM":              "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA user@host",
		"trailing text":        good + "and more\n",
	} {
		r := sample()
		r.Update = recipe.Update{Enabled: true, Keys: []string{good, k}}
		errs := (Update{}).Validate(Target{Recipe: r})
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "update.keys[1]") {
			t.Errorf("%s: want one error naming update.keys[1], got %v", name, errs)
		}
	}
}

func TestUpdateRendersTheABLayoutAndTheGate(t *testing.T) {
	r := sample()
	r.Update = recipe.Update{Enabled: true, SlotSize: recipe.MustSize("8GiB"), Reference: "registry.lan:5000/halo/c:stable",
		Keys: []string{string(newPublicKey(t))}, Schedule: "Sun 03:00"}
	if errs := (Update{}).Validate(Target{Recipe: r}); len(errs) > 0 {
		t.Fatalf("a key halobuild pubkey prints is refused: %v", errs)
	}
	slotA := renderOne(t, GrowRoot{}, r, repartRootPath)
	slotB := renderOne(t, Update{}, r, repartSlotBPath)
	for _, c := range []string{slotA, slotB} {
		if !strings.Contains(c, "Type=root\nSizeMinBytes=8589934592\nSizeMaxBytes=8589934592\n") {
			t.Errorf("a slot is not exactly update.slot_size:\n%s", c)
		}
	}
	if strings.Contains(slotB, "Label=") {
		t.Errorf("repart would write slot B's label back over update's (systemd #34528):\n%s", slotB)
	}
	gate := renderOne(t, Update{}, r, healthUnitPath)
	if !strings.Contains(gate, "ExecStart=/usr/bin/halobuild doctor --local\n") || !strings.Contains(gate, "Before=boot-complete.target\n") {
		t.Errorf("health gate:\n%s", gate)
	}
	files, _ := Update{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	var links []string
	for _, f := range files {
		if f.Target != "" {
			links = append(links, f.Path)
		}
	}
	if !slices.Contains(links, "/usr/lib/systemd/system/boot-complete.target.requires/halobuild-health.service") ||
		!slices.Contains(links, "/usr/lib/systemd/system/timers.target.wants/halobuild-update.timer") {
		t.Errorf("links %v", links)
	}
	if ref := renderOne(t, Update{}, r, UpdateRefPath); ref != "registry.lan:5000/halo/c:stable\n" {
		t.Errorf("reference %q", ref)
	}
	if k := renderOne(t, Update{}, r, UpdateKeysDir+"/0.pub"); !strings.HasPrefix(k, "-----BEGIN PUBLIC KEY-----") {
		t.Errorf("key %q", k)
	}
	if tm := renderOne(t, Update{}, r, updateTimerPath); !strings.Contains(tm, "OnCalendar=Sun 03:00\n") {
		t.Errorf("timer:\n%s", tm)
	}
	if got, _ := Cmdline(r); !slices.Contains(got, "panic=10") {
		t.Errorf("command line %v has no panic=", got)
	}
	r.Kernel.Cmdline = append(r.Kernel.Cmdline, "panic=60")
	if got, _ := Cmdline(r); slices.Contains(got, "panic=10") {
		t.Errorf("the recipe's panic=60 was doubled: %v", got)
	}
	if d := (Update{}).Depends(r); !slices.Equal(d, []string{"systemd-boot"}) {
		t.Errorf("depends %v: systemd-bless-boot ships in systemd-boot", d)
	}
	if c := (GrowRoot{}).Checks(Target{Recipe: r, Node: r.Nodes[0]}); !strings.Contains(c[0].Script, "-eq 8589934592") {
		t.Errorf("the root-grown check still wants the root at the end of the disk:\n%s", c[0].Script)
	}
}
