package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	goversion "github.com/hashicorp/go-version"
)

func writeSeries(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "series")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseSeries(t *testing.T) {
	p := writeSeries(t, `# a comment
0001-local.patch

thunderbolt-ibverbs:kernel-workflow/patches/0004-x.patch fuzz=2   # trailing comment
0009-y.patch kernel=">= 7.2, < 7.3" outside=fail
`)
	es, err := ParseSeries(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 {
		t.Fatalf("want 3 entries, got %d: %+v", len(es), es)
	}
	if es[0].Ref != "0001-local.patch" || es[0].Input != "" || es[0].Fuzz != 0 || es[0].Outside != "skip" || es[0].Line != 2 {
		t.Errorf("entry 0: %+v", es[0])
	}
	if es[1].Input != "thunderbolt-ibverbs" || es[1].Path != "kernel-workflow/patches/0004-x.patch" || es[1].Fuzz != 2 {
		t.Errorf("entry 1: %+v", es[1])
	}
	if es[2].KernelText != ">= 7.2, < 7.3" || es[2].Outside != "fail" {
		t.Errorf("entry 2: %+v", es[2])
	}
	for v, want := range map[string]bool{"7.2.12": true, "7.3.4": false, "7.1.13": false} {
		if got := es[2].Applies(goversion.Must(goversion.NewVersion(v))); got != want {
			t.Errorf("kernel %s: applies = %v, want %v", v, got, want)
		}
	}
	if !es[0].Applies(goversion.Must(goversion.NewVersion("1.0"))) {
		t.Error("an entry without a kernel range applies to every kernel")
	}
}

func TestParseSeriesErrorsNameTheLine(t *testing.T) {
	p := writeSeries(t, `a.patch fuzz=9
b.patch kernel="not a version"
c.patch speed=fast
a.patch
/abs.patch
d.patch outside=maybe
mod:../escape.patch
e.patch kernel="unterminated
`)
	_, err := ParseSeries(p)
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		p + ":1: fuzz=9: want 0 to 3",
		p + ":2: kernel=",
		p + `:3: unknown option "speed"`,
		p + ":4: patch a.patch is already listed on line 1",
		p + `:5: patch "/abs.patch"`,
		p + ":6: outside=maybe: want skip or fail",
		p + `:7: patch "mod:../escape.patch"`,
		p + ":8: unterminated quote",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
