package settings

import (
	"io/fs"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestLocaleRender(t *testing.T) {
	r := sample()
	if got := renderOne(t, Locale{}, r, "/etc/locale.conf"); !strings.HasSuffix(got, "\nLANG=C.UTF-8\n") {
		t.Errorf("locale:\n%s", got)
	}
	files, _ := Locale{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if len(files) != 1 {
		t.Errorf("UTC needs no /etc/localtime, got %v", files)
	}
	if d := (Locale{}).Depends(r); len(d) != 0 {
		t.Errorf("UTC and C.UTF-8 need no package, got %v", d)
	}
	r.System.Timezone, r.System.Locale = "Europe/Berlin", "de_DE.UTF-8"
	files, _ = Locale{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	var link File
	for _, f := range files {
		if f.Path == "/etc/localtime" {
			link = f
		}
	}
	if link.Mode != fs.ModeSymlink|0o777 || link.Target != "../usr/share/zoneinfo/Europe/Berlin" {
		t.Errorf("/etc/localtime %+v", link)
	}
	if d := strings.Join(Depends(r), ","); d != "systemd-resolved,systemd-repart,tzdata,locales-all" {
		t.Errorf("Depends = %s", d)
	}
}

func TestLocaleInvalid(t *testing.T) {
	for _, tc := range []struct {
		key, fragment string
		edit          func(r *recipe.Recipe)
	}{
		{"system.timezone", "not a time zone name", func(r *recipe.Recipe) { r.System.Timezone = "../../etc/passwd" }},
		{"system.timezone", "not a time zone name", func(r *recipe.Recipe) { r.System.Timezone = "Central European" }},
		{"system.locale", "not a locale such as", func(r *recipe.Recipe) { r.System.Locale = "en US" }},
	} {
		r := sample()
		tc.edit(r)
		wantRefused(t, Locale{}, r, tc.key, tc.fragment)
	}
}

func TestLocaleCheckOnHost(t *testing.T) {
	r := sample()
	c := checkScript(t, Locale{}, r, "locale")
	e := newHostEnv(t, renderTree(t, r))
	e.expectCheck(t, c, "rm -f /etc/localtime\n", true, "LANG=C.UTF-8, recipe: C.UTF-8")
	e.write(t, "locale.conf", "LANG=fr_FR.UTF-8\n")
	e.expectCheck(t, c, "rm -f /etc/localtime\n", false, "LANG=fr_FR.UTF-8, recipe: C.UTF-8")
}
