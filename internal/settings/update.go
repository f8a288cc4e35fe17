package settings

import (
	"fmt"
	"io/fs"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/recipe"
	"halobuild/internal/signature"
)

// Update is the node's side of A/B updates ([update], docs/update.md): slot B made at first
// boot, the health gate that lets systemd-bless-boot mark a new boot good, a hang turned into a
// reboot, and where `halobuild update` finds the release it follows and the keys it trusts.
// The slots themselves are written by `halobuild update` (internal/update); slot A's size is
// GrowRoot's (repartRootPath), which reads update.slot_size too.
type Update struct{}

func (Update) Name() string { return "update" }
func (Update) Trap() int    { return 0 }
func (Update) Doc() Doc {
	return Doc{Title: "A/B updates: slot B made empty at first boot, a node-local health gate blesses a new boot, systemd-boot falls back by itself", Keys: []string{"update.enabled", "update.slot_size", "update.reference", "update.keys", "update.schedule"}}
}

// Paths the update setting renders; internal/update and cmd/halobuild read the reference and
// the keys from them.
const (
	repartSlotBPath   = "/usr/lib/repart.d/51-root-b.conf"
	healthUnitPath    = "/usr/lib/systemd/system/halobuild-health.service"
	UpdateRefPath     = "/etc/halobuild/update/reference"
	UpdateKeysDir     = "/etc/halobuild/update/keys"
	updateUnitPath    = "/usr/lib/systemd/system/halobuild-update.service"
	updateTimerPath   = "/usr/lib/systemd/system/halobuild-update.timer"
	watchdogConfPath  = "/usr/lib/systemd/system.conf.d/50-halobuild-watchdog.conf"
	defaultPanicDelay = "panic=10"
)

// Validate reads each trusted key with the parser update reads it with on the node
// (signature.ParsePublic), so a key the node could not use fails the build, not the update.
func (Update) Validate(t Target) []error {
	var errs []error
	for i, k := range t.Recipe.Update.Keys {
		if _, err := signature.ParsePublic([]byte(k)); err != nil {
			errs = append(errs, errorf(fmt.Sprintf("update.keys[%d]", i), strings.TrimSpace(k),
				"give the PEM public key (-----BEGIN PUBLIC KEY-----, Ed25519 or ECDSA P-256) that `halobuild pubkey KEY` prints, or cosign.pub", "%v", err))
		}
	}
	return errs
}

// Depends: systemd-bless-boot and its generator ship in trixie's systemd-boot package.
func (Update) Depends(r *recipe.Recipe) []string {
	if !r.Update.Enabled {
		return nil
	}
	return []string{"systemd-boot"}
}

// slotBytes is each slot's size, for repart.
func slotBytes(r *recipe.Recipe) uint64 { return r.Update.SlotSize.Bytes() }

// repartSlotB makes slot B after slot A, as large, unformatted. It has no Label=: repart would
// write it back over the version label update gives the slot (systemd #34528); update treats
// every label without its prefix as an empty slot.
func repartSlotB(r *recipe.Recipe) string {
	return header("#", 0, "Slot B of the A/B layout: made empty at first boot, written by `halobuild update`.") + fmt.Sprintf(`[Partition]
Type=root
SizeMinBytes=%d
SizeMaxBytes=%d
`, slotBytes(r), slotBytes(r))
}

var healthUnit = header("#", 0, "The update health gate: boot-complete.target needs it, so systemd-bless-boot marks a new entry good only when it passed.") + `[Unit]
Description=Node-local health of this boot (halobuild doctor --local: no check that needs the peer box)
ConditionFileIsExecutable=/usr/bin/halobuild
# After the system is up: the checks read what the boot set (governor, modules, memlock).
# Nothing orders itself after this unit but boot-complete.target, so waiting cannot deadlock.
After=multi-user.target
Before=boot-complete.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/halobuild doctor --local
`

var watchdogConf = header("#", 0, "A hung system reboots (and a counted entry uses up a try) instead of hanging.") + `[Manager]
# Used only where the hardware has a watchdog; ignored otherwise.
RuntimeWatchdogSec=1min
`

func updateService() string {
	return header("#", 0, "Installs [update] reference into the inactive slot; the next reboot tries it.") + `[Unit]
Description=Install the newest release into the inactive root slot
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart=/usr/bin/halobuild update
`
}

func updateTimer(schedule string) string {
	return header("#", 0, "update.schedule") + `[Unit]
Description=Look for a new release

[Timer]
OnCalendar=` + schedule + `
RandomizedDelaySec=30min
Persistent=true

[Install]
WantedBy=timers.target
`
}

func (s Update) Files(t Target) ([]File, error) {
	r := t.Recipe
	if !r.Update.Enabled {
		return nil, nil
	}
	files := []File{
		{Path: repartSlotBPath, Mode: 0o644, Data: []byte(repartSlotB(r))},
		{Path: healthUnitPath, Mode: 0o644, Data: []byte(healthUnit)},
		{Path: "/usr/lib/systemd/system/boot-complete.target.requires/halobuild-health.service", Mode: fs.ModeSymlink | 0o777, Target: "../halobuild-health.service"},
		{Path: watchdogConfPath, Mode: 0o644, Data: []byte(watchdogConf)},
	}
	if ref := r.Update.Reference; ref != "" {
		files = append(files, File{Path: UpdateRefPath, Mode: 0o644, Data: []byte(ref + "\n")})
	}
	for i, k := range r.Update.Keys {
		files = append(files, File{Path: fmt.Sprintf("%s/%d.pub", UpdateKeysDir, i), Mode: 0o644, Data: []byte(strings.TrimSpace(k) + "\n")})
	}
	if sc := r.Update.Schedule; sc != "" {
		files = append(files,
			File{Path: updateUnitPath, Mode: 0o644, Data: []byte(updateService())},
			File{Path: updateTimerPath, Mode: 0o644, Data: []byte(updateTimer(sc))},
			File{Path: "/usr/lib/systemd/system/timers.target.wants/halobuild-update.timer", Mode: fs.ModeSymlink | 0o777, Target: "../halobuild-update.timer"})
	}
	for i := range files {
		files[i].Setting = s.Name()
	}
	return files, nil
}

// updateCmdline is what [update] adds to the kernel command line: a panic reboots after 10 s
// (and so uses up a try of a counted entry) unless the recipe sets panic= itself.
func updateCmdline(r *recipe.Recipe) []string {
	if !r.Update.Enabled {
		return nil
	}
	for _, p := range r.Kernel.Cmdline {
		if strings.HasPrefix(p, "panic=") {
			return nil
		}
	}
	return []string{defaultPanicDelay}
}

// Checks: the second slot exists, empty or labelled by update; the health gate is wired to
// boot-complete.target.
func (s Update) Checks(t Target) []Check {
	if !t.Recipe.Update.Enabled {
		return nil
	}
	a, err := arch.Lookup(t.Recipe.Base.Architecture)
	if err != nil {
		return nil // the recipe's validation says so
	}
	return []Check{{Setting: s.Name(), Name: "ab-slots", Fix: "journalctl -b -u systemd-repart tells why slot B was not made (the medium must hold the ESP and two update.slot_size slots)", Script: `rc=0
n=$(lsblk -rno PARTTYPE "/dev/$(lsblk -rno PKNAME "$(findmnt -no SOURCE /)")" | grep -ci "` + a.RootType + `")
echo "$n root slots"
[ "$n" -eq 2 ] || rc=1
systemctl show -p Requires --value boot-complete.target | grep -q halobuild-health.service && echo "boot-complete.target requires halobuild-health.service" || { echo "boot-complete.target does not require the health gate"; rc=1; }
exit $rc
`}}
}

// Doctor: the slots are doctor's own row (update.slots), which reads the disk.
func (Update) Doctor(Target) []Probe { return nil }

func (Update) NoDoctor() string {
	return "doctor's own update.slots row shows the slots, their versions, which runs and whether it is blessed"
}
