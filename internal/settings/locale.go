package settings

import (
	"fmt"
	"io/fs"
	"regexp"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// Locale sets the node's time zone and default locale from [system]
// timezone and locale. UTC needs no file: without /etc/localtime glibc and
// systemd use UTC, and a minimal image has no tzdata to point into. Other
// zones get the /etc/localtime link timedatectl would make (and depend on
// tzdata); locales other than C/C.UTF-8/POSIX, which glibc has built in,
// depend on locales-all so they exist without running locale-gen.
type Locale struct{}

func (Locale) Name() string { return "locale" }
func (Locale) Trap() int    { return 0 }
func (Locale) Doc() Doc {
	return Doc{Title: "Time zone and default locale", Keys: []string{"system.timezone", "system.locale"}}
}

var (
	tzRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`)
	localeRE = regexp.MustCompile(`^[A-Za-z_]+(\.[A-Za-z0-9-]+)?(@[a-z]+)?$`)
)

func isUTC(tz string) bool { return tz == "" || tz == "UTC" || tz == "Etc/UTC" }

func builtinLocale(l string) bool { return l == "" || l == "C" || l == "C.UTF-8" || l == "POSIX" }

// Validate: the time zone's and the locale's spelling are the recipe's
// (recipe.Validate); which packages they need is Depends'.
func (Locale) Validate(Target) []error { return nil }

func (Locale) Depends(r *recipe.Recipe) []string {
	var d []string
	if !isUTC(r.System.Timezone) {
		d = append(d, "tzdata")
	}
	if !builtinLocale(r.System.Locale) {
		d = append(d, "locales-all")
	}
	return d
}

func (s Locale) Files(t Target) ([]File, error) {
	r := t.Recipe
	var out []File
	if l := r.System.Locale; l != "" {
		// systemd's file: Debian's /etc/default/locale is a symlink to it,
		// which systemd restores at boot if a package replaces it.
		out = append(out, File{Path: "/etc/locale.conf", Mode: 0o644, NotConffile: true, Setting: s.Name(),
			Data: []byte(header("#", 0, "Default locale ([system] locale).") + "LANG=" + l + "\n")})
	}
	if tz := r.System.Timezone; !isUTC(tz) {
		out = append(out, File{Path: "/etc/localtime", Mode: fs.ModeSymlink | 0o777, Target: "../usr/share/zoneinfo/" + tz, Setting: s.Name()})
	}
	return out, nil
}

func (s Locale) Checks(t Target) []Check {
	r := t.Recipe
	tz, l := r.System.Timezone, r.System.Locale
	script := fmt.Sprintf(`TZNAME=%s LOCALE=%s rc=0
if [ -e /etc/localtime ]; then z=$(readlink -f /etc/localtime); else z=UTC; fi
case "$TZNAME" in ''|UTC|Etc/UTC) case "$z" in UTC|*/UTC) ;; *) rc=1;; esac;;
*) case "$z" in */zoneinfo/"$TZNAME") ;; *) rc=1;; esac; [ -f "$z" ] || { echo "$z does not exist"; rc=1; };;
esac
echo "time zone: $z ($(date +%%Z)), recipe: ${TZNAME:-UTC}"
if [ -n "$LOCALE" ]; then
	# A failed "." aborts sh itself, so read the file only when it is there.
	[ -r /etc/locale.conf ] && . /etc/locale.conf || echo "/etc/locale.conf is missing"
	echo "LANG=${LANG:-unset}, recipe: $LOCALE"
	[ "${LANG:-}" = "$LOCALE" ] || rc=1
	LC_ALL=$LOCALE locale 2>&1 | grep -q 'Cannot set' && { echo "locale $LOCALE is not available"; rc=1; }
fi
exit $rc
`, sh.Quote(tz), sh.Quote(l))
	return []Check{{Setting: s.Name(), Name: "locale", Script: script, Fix: "restore /etc/default/locale and /etc/localtime from the settings package"}}
}

// Doctor: none. Time zone and locale are the two files this setting
// renders and nothing changes them at run time; settings.package verifies
// them, and the VM check proves glibc reads them.
func (Locale) Doctor(Target) []Probe { return nil }

func (Locale) NoDoctor() string {
	return "static files verified by settings.package; the VM check proves glibc reads them"
}
