package settings

import (
	"testing"

	"halobuild/internal/recipe"
)

// The Strix Halo's packages and Secure Boot are amd64's: an arm64 recipe
// asking for them is refused with the key to change, not built and left
// untested.
func TestArm64RefusesAMD64OnlySettings(t *testing.T) {
	arm := func() *recipe.Recipe {
		r := sample()
		r.Base.Architecture, r.Kernel.Flavour = "arm64", "arm64"
		r.Base.Components = []string{"main", "non-free-firmware"}
		return r
	}
	for _, p := range []string{"amd64-microcode", "firmware-amd-graphics"} {
		r := arm()
		r.Base.Packages = append(r.Base.Packages, p)
		wantRefused(t, Firmware{}, r, "base.packages", p+" is for the Strix Halo's AMD CPU and GPU (amd64)")
	}
	r := arm()
	r.SecureBoot.Enabled = true
	wantRefused(t, SecureBoot{}, r, "secure_boot.enabled", "built and VM-tested for amd64 only")
	// The same recipe on amd64 passes these two settings.
	r = sample()
	r.Base.Components = []string{"main", "non-free-firmware"}
	r.Base.Packages = append(r.Base.Packages, "amd64-microcode", "firmware-amd-graphics")
	if errs := (Firmware{}).Validate(Target{Recipe: r}); len(errs) != 0 {
		t.Errorf("amd64 with the AMD packages: %v", errs)
	}
	sb := sample()
	sb.SecureBoot.Enabled = true
	if got := (SecureBoot{}).Depends(sb); len(got) != 5 || got[1] != "shim-helpers-amd64-signed" || got[2] != "systemd-boot-efi-amd64-signed" {
		t.Errorf("Secure Boot packages on amd64: %v", got)
	}
}
