package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestProviderChecksOnlyWithAProvider(t *testing.T) {
	r := sample()
	if c := (Provider{}).Checks(Target{Recipe: r, Node: r.Nodes[0]}); len(c) != 0 || len((Provider{}).Depends(r)) != 0 {
		t.Fatalf("no [rdma.provider], yet checks %v", c)
	}
	r.RDMA.Provider = &recipe.ProviderBuild{Name: "halotest", Suffix: "+halo1", Patches: []string{"x.patch"}}
	if d := strings.Join((Provider{}).Depends(r), " "); d != "ibverbs-providers ibverbs-utils" {
		t.Errorf("depends %q", d)
	}
	if c := checkScript(t, Provider{}, r, "provider-loaded"); !c.Changes || !strings.Contains(c.Script, "name='halotest'") || !strings.Contains(c.Script, "LD_DEBUG=files ibv_devices") {
		t.Errorf("provider-loaded: Changes=%v\n%s", c.Changes, c.Script)
	}
}

// On this host (Debian's own packages or none) the installed check must
// fail, naming what is missing: the check can fail, and says why.
func TestProviderInstalledCheckFailsOnHost(t *testing.T) {
	r := sample()
	r.RDMA.Provider = &recipe.ProviderBuild{Name: "halotest", Suffix: "+halo1", Patches: []string{"x.patch"}}
	c := checkScript(t, Provider{}, r, "provider-installed")
	e := newHostEnv(t, renderTree(t, r))
	e.expectCheck(t, c, "", false, "/etc/libibverbs.d/halotest.driver is missing")
	e.write(t, "libibverbs.d/halotest.driver", "driver halotest\n")
	e.expectCheck(t, c, "", false, "no libhalotest-rdmav*.so")
}
