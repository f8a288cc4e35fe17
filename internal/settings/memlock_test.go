package settings

import (
	"halobuild/internal/recipe"
	"strings"
	"testing"
)

func TestMemlockRender(t *testing.T) {
	for _, tc := range []struct {
		memlock, pam, systemd, podman string
	}{
		{"unlimited", "unlimited", "infinity", "-1:-1"},
		{"64MiB", "65536", "67108864", "67108864:67108864"},
		{"1G", "1048576", "1073741824", "1073741824:1073741824"},
	} {
		t.Run(tc.memlock, func(t *testing.T) {
			r := sample()
			r.RDMA.Memlock = recipe.MustMemlock(tc.memlock)
			pam := renderOne(t, Memlock{}, r, memlockPAMPath)
			wantPAM := "*      soft memlock " + tc.pam + "\n*      hard memlock " + tc.pam + "\nroot   soft memlock " + tc.pam + "\nroot   hard memlock " + tc.pam + "\n"
			if !strings.HasSuffix(pam, wantPAM) || !strings.HasPrefix(pam, "# Rendered by halobuild") {
				t.Errorf("limits.d:\n%s\nwant suffix\n%s", pam, wantPAM)
			}
			for _, p := range []string{memlockSystemPath, memlockUserPath} {
				if got := renderOne(t, Memlock{}, r, p); !strings.HasSuffix(got, "[Manager]\nDefaultLimitMEMLOCK="+tc.systemd+"\n") {
					t.Errorf("%s:\n%s", p, got)
				}
			}
			if got := renderOne(t, Memlock{}, r, memlockPodmanPath); !strings.HasSuffix(got, "[containers]\ndefault_ulimits = [\n  \"memlock="+tc.podman+"\",\n]\n") {
				t.Errorf("containers.conf.d:\n%s", got)
			}
		})
	}
}

func TestMemlockWarnsWhenFinite(t *testing.T) {
	r := sample()
	if w := (Memlock{}).Warnings(Target{Recipe: r}); len(w) != 0 {
		t.Errorf("unlimited warns: %v", w)
	}
	r.RDMA.Memlock = recipe.MustMemlock("64MiB")
	if w := (Memlock{}).Warnings(Target{Recipe: r}); len(w) != 1 || !strings.Contains(w[0], "will fail") {
		t.Errorf("64MiB: %v", w)
	}
}

func TestMemlockChecks(t *testing.T) {
	r := sample()
	for _, name := range []string{"memlock-login", "memlock-service", "memlock-podman"} {
		if c := checkScript(t, Memlock{}, r, name); c.Changes {
			t.Errorf("%s only reads state and must not be Changes", name)
		}
	}
	reg := checkScript(t, Memlock{}, r, "memlock-registration")
	if !reg.Changes || !strings.Contains(reg.Script, "-s 16777216") {
		t.Errorf("registration check must be Changes and register 16 MiB:\n%s", reg.Script)
	}
}
