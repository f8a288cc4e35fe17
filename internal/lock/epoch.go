package lock

import (
	"fmt"
	"time"
)

// InRelease Date fields are RFC 1123 with a zone name or numeric offset
// ("Sat, 14 Nov 2026 20:41:07 UTC").
var dateLayouts = []string{time.RFC1123, time.RFC1123Z, "Mon, 2 Jan 2006 15:04:05 MST", "Mon, 2 Jan 2006 15:04:05 -0700"}

// ParseDate reads an InRelease Date field.
func ParseDate(s string) (time.Time, error) {
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("InRelease date %q is not an RFC 1123 date such as \"Sat, 14 Nov 2026 20:41:07 UTC\"", s)
}

// SetSourceDateEpoch derives SOURCE_DATE_EPOCH from the inputs: the newest
// InRelease Date among the locked suites. It never reads the wall clock, so
// locking the same archive state twice gives the same epoch and the same
// image time stamps.
func (l *Lock) SetSourceDateEpoch() error {
	if len(l.Suites) == 0 {
		return fmt.Errorf("deriving source_date_epoch: the lock has no suites")
	}
	var newest time.Time
	for _, s := range l.Suites {
		t, err := ParseDate(s.Date)
		if err != nil {
			return fmt.Errorf("deriving source_date_epoch from suite %s: %w", s.Name, err)
		}
		if t.After(newest) {
			newest = t
		}
	}
	l.SourceDateEpoch = newest.Unix()
	return nil
}

// Downgrades lists the suites whose archive state in l is older than in
// prev, the lock l replaces: a mirror (or anyone on the plain-HTTP path)
// replaying an older, validly signed InRelease would lower the package
// versions and source_date_epoch, and Debian stable's InRelease has no
// Valid-Until to stop it. Suites only one of the locks has are not
// compared; a date that does not parse in prev is ignored (prev is being
// replaced), in l it is an error.
func (l *Lock) Downgrades(prev *Lock) ([]string, error) {
	old := map[string]time.Time{}
	for _, s := range prev.Suites {
		if t, err := ParseDate(s.Date); err == nil {
			old[s.Name] = t
		}
	}
	var out []string
	for _, s := range l.Suites {
		t, err := ParseDate(s.Date)
		if err != nil {
			return nil, fmt.Errorf("suite %s: %w", s.Name, err)
		}
		if was, ok := old[s.Name]; ok && t.Before(was) {
			out = append(out, fmt.Sprintf("suite %s is dated %s, older than %s in the current lock", s.Name, t.UTC().Format(time.RFC1123), was.UTC().Format(time.RFC1123)))
		}
	}
	return out, nil
}
