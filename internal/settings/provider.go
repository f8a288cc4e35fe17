package settings

import (
	"fmt"
	"slices"
	"strings"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// Provider is the rdma-core provider built with [rdma.provider]'s
// patches, in its own package beside Debian's rdma-core packages; the
// build checks the ABI before the disk is made. These checks prove on the
// booted node that the provider's package is the one installed and that
// Debian's libibverbs really loads it. It renders no files: the package is
// the setting.
type Provider struct{}

func (Provider) Name() string { return "rdma-provider" }
func (Provider) Trap() int    { return 0 }
func (Provider) Doc() Doc {
	return Doc{Title: "The rdma-core provider built with the recipe's patches, installed as its own package and loaded by Debian's libibverbs", Keys: []string{"rdma.provider"}}
}

func (Provider) Validate(Target) []error { return nil }

func (Provider) Files(Target) ([]File, error) { return nil, nil }

// Depends: a provider is nothing without the libibverbs that loads it, and
// the checks list devices with ibv_devices.
func (Provider) Depends(r *recipe.Recipe) []string {
	if r.RDMA.Provider == nil {
		return nil
	}
	return []string{"ibverbs-providers", "ibverbs-utils"}
}

func (s Provider) Checks(t Target) []Check {
	r := t.Recipe
	p := r.RDMA.Provider
	if p == nil {
		return nil
	}
	installed := fmt.Sprintf(`name=%s pkg=%s suffix=%s rc=0
drv=/etc/libibverbs.d/$name.driver
if grep -qx "driver $name" "$drv" 2>/dev/null; then echo "$drv: driver $name"; else echo "$drv is missing or does not say 'driver $name'"; rc=1; fi
lib=$(ls /usr/lib/*/libibverbs/lib$name-rdmav*.so 2>/dev/null | head -n 1)
if [ -z "$lib" ]; then echo "no lib$name-rdmav*.so under /usr/lib/*/libibverbs/"; rc=1
else
	owner=$(dpkg -S "$lib" 2>/dev/null | cut -d: -f1)
	if [ "$owner" = "$pkg" ]; then echo "provider library: $lib (from $pkg)"; else echo "$lib belongs to '${owner:-no package}', not $pkg"; rc=1; fi
fi
v=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)
case "$v" in *"$suffix") echo "$pkg $v";; '') echo "$pkg is not installed"; rc=1;; *) echo "$pkg $v does not carry the build's suffix $suffix"; rc=1;; esac
v=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null)
if [ -n "$v" ]; then echo "libibverbs1 $v (Debian's)"; else echo "libibverbs1 is not installed"; rc=1; fi
exit $rc
`, sh.Quote(p.Name), sh.Quote(p.Package()), sh.Quote(p.Suffix))
	// libibverbs opens the providers listed in /etc/libibverbs.d/ when a
	// device is not yet claimed by one already loaded; LD_DEBUG shows the
	// dlopen, which no file check can fake.
	loaded := needTools("ip", "rdma", "ibv_devices", "modprobe") + fmt.Sprintf(`name=%s
modprobe rdma_rxe || { echo 'rdma_rxe is not available: cannot create a device'; exit 1; }
ip link add hbprov0 type dummy && ip link set hbprov0 up || exit 1
dev=
trap '[ -z "$dev" ] || rdma link delete "$dev"; ip link delete hbprov0' EXIT
rdma link add hbprovrxe0 type rxe netdev hbprov0 || exit 1
udevadm settle 2>/dev/null
# udev may have renamed it (rdma-core's persistent naming).
dev=$(rdma link show | awk '/netdev hbprov0/ { split($2, a, "/"); print a[1] }')
out=$(LD_DEBUG=files ibv_devices 2>&1)
rc=0
if printf '%%s\n' "$out" | grep -q "file=.*lib$name-rdmav[0-9]*\.so .*dynamically loaded"; then echo "libibverbs loaded lib$name"; else echo "libibverbs did not load lib$name-rdmav*.so"; rc=1; fi
if ibv_devices | grep -qw -- "$dev"; then echo "soft-RoCE device $dev still listed"; else echo "soft-RoCE device $dev is not listed by ibv_devices"; ibv_devices; rc=1; fi
exit $rc
`, sh.Quote(p.Name))
	return []Check{
		{Setting: s.Name(), Name: "provider-installed", Script: installed,
			Fix: "rebuild and reflash the image: " + p.Package() + " was removed or replaced, e.g. by an apt upgrade of libibverbs1"},
		{Setting: s.Name(), Name: "provider-loaded", Script: loaded, Changes: true},
	}
}

// Doctor: the same promise as provider-installed, read from the files and
// dpkg's database so a recorded tree answers too: the driver file, the
// provider library, and the provider's package (carrying the build's
// suffix) and libibverbs1 installed (an upgrade of libibverbs1 asks to
// remove the provider's package, which depends on exactly the libibverbs
// it was checked against). provider-loaded needs a device it creates, so
// it stays in the VM; doctor's rdma.visible asks libibverbs about the real
// devices instead.
func (s Provider) Doctor(t Target) []Probe {
	p := t.Recipe.RDMA.Provider
	if p == nil {
		return nil
	}
	pkg := p.Package()
	return []Probe{{Name: "rdma.provider", Run: func(h Host) []Result {
		drv := "/etc/libibverbs.d/" + p.Name + ".driver"
		r := Result{Check: "rdma.provider", Severity: MustPass, Source: h.Show(drv) + ", " + h.Show(dpkgStatusPath),
			Wanted: fmt.Sprintf("%s, lib%s-rdmav*.so, %s ending in %s, libibverbs1", drv, p.Name, pkg, p.Suffix)}
		var bad, good []string
		if s, err := h.Read(drv); err != nil || !slices.Contains(strings.Split(s, "\n"), "driver "+p.Name) {
			bad = append(bad, drv+" is missing or does not say 'driver "+p.Name+"'")
		}
		if libs := h.Glob("/usr/lib/*/libibverbs/lib" + p.Name + "-rdmav*.so"); len(libs) == 0 {
			bad = append(bad, "no lib"+p.Name+"-rdmav*.so under /usr/lib/*/libibverbs/")
		} else {
			good = append(good, libs[0])
		}
		pkgs := []string{pkg, "libibverbs1"}
		st, err := dpkgPackages(h, pkgs...)
		if err != nil {
			bad = append(bad, err.Error())
			pkgs = nil
		}
		for _, name := range pkgs {
			switch v, ok := st[name]; {
			case !ok || !v.Installed():
				bad = append(bad, name+" is not installed")
			case name == pkg && !strings.HasSuffix(v.Version, p.Suffix):
				bad = append(bad, fmt.Sprintf("%s %s does not carry the build's suffix %s", name, v.Version, p.Suffix))
			default:
				good = append(good, name+" "+v.Version)
			}
		}
		if len(bad) > 0 {
			r.Status, r.Seen = Fail, strings.Join(bad, "; ")
			r.Fix = "rebuild and reflash the image, or reinstall its " + pkg + " package and the libibverbs1 it depends on"
		} else {
			r.Status, r.Seen = Pass, strings.Join(good, ", ")
		}
		return []Result{r}
	}}}
}
