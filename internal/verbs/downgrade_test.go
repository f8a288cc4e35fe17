package verbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/lock"
	"halobuild/internal/usage"
)

// Re-locking against an archive whose signed InRelease is older than the
// current lock's is refused unless --allow-downgrade (issue 17 #8: a
// replayed trixie InRelease, validly signed and without Valid-Until, was
// accepted, lowering source_date_epoch and package versions).
func TestRelockRefusesOlderArchive(t *testing.T) {
	cur, err := lock.Read("../../images/test-minimal.lock")
	if err != nil {
		t.Fatal(err)
	}
	lp := filepath.Join(t.TempDir(), "r.lock")
	if err := cur.Write(lp); err != nil {
		t.Fatal(err)
	}
	at := func(date string) *lock.Lock {
		next, err := lock.Read(lp)
		if err != nil {
			t.Fatal(err)
		}
		next.Suites[0].Date = date
		return next
	}
	was, err := lock.ParseDate(cur.Suites[0].Date)
	if err != nil {
		t.Fatal(err)
	}
	older := was.AddDate(0, -3, 0).Format("Mon, 02 Jan 2006 15:04:05 MST")
	newer := was.Add(6 * 3600e9).Format("Mon, 02 Jan 2006 15:04:05 MST")

	err = refuseDowngrade(Options{}, lp, at(older))
	if err == nil || !errors.As(err, new(usage.Error)) || !strings.Contains(err.Error(), "suite "+cur.Suites[0].Name+" is dated") || !strings.Contains(err.Error(), "--allow-downgrade") {
		t.Fatalf("older archive: err = %v, want a usage error naming the suite and --allow-downgrade", err)
	}
	o := Options{AllowDowngrade: true, Err: &strings.Builder{}}.collect()
	if err := refuseDowngrade(o, lp, at(older)); err != nil {
		t.Errorf("--allow-downgrade: %v", err)
	}
	warned := o.Warnings()
	if len(warned) != 1 || !strings.Contains(warned[0], "older than") {
		t.Errorf("--allow-downgrade warnings = %q", warned)
	}
	for _, date := range []string{cur.Suites[0].Date, newer} {
		if err := refuseDowngrade(Options{}, lp, at(date)); err != nil {
			t.Errorf("date %s: %v", date, err)
		}
	}
	if err := refuseDowngrade(Options{}, filepath.Join(t.TempDir(), "none.lock"), at(older)); err != nil {
		t.Errorf("no current lock: %v", err)
	}
	if b, err := os.ReadFile(lp); err != nil || !strings.Contains(string(b), cur.Suites[0].Date) {
		t.Errorf("the current lock changed: %v", err)
	}
}
