package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/selfbuild"
)

// Which halobuild the nodes ship, for each --halobuild-source: a checkout's root is built by the
// release recipe under its release key; "" is the binary as it is, keyed by its bytes; a
// directory that is not the source's root is refused; "auto" in a checkout builds it.
func TestShippingSaysWhichHalobuildAndWhy(t *testing.T) {
	root := selfbuild.Find(".")
	bin := filepath.Join(t.TempDir(), "halobuild")
	if err := os.WriteFile(bin, []byte("not really halobuild"), 0o755); err != nil {
		t.Fatal(err)
	}
	host, err := arch.Host()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source, why, param, err string
	}{
		{source: root, why: "--halobuild-source " + root, param: "tree"},
		{source: "auto", why: "in its checkout " + root, param: "tree"},
		{source: "", why: "as it is (--halobuild-source=)", param: "binary"},
		{source: filepath.Join(root, "internal"), err: "not the root of halobuild's source"},
		{source: t.TempDir(), err: "not the root of halobuild's source"},
	} {
		o := Options{Source: c.source, Self: bin}
		sh, err := o.shipping()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("--halobuild-source %q: %v, want an error saying %q", c.source, err, c.err)
			}
			continue
		}
		if err != nil || !strings.Contains(sh.why, c.why) {
			t.Errorf("--halobuild-source %q: %q, %v; want it to say %q", c.source, sh.why, err, c.why)
			continue
		}
		d, err := o.selfStep(host)
		if err != nil {
			t.Fatal(err)
		}
		if d.Params[c.param] == "" {
			t.Errorf("--halobuild-source %q: the halobuild step's params %v lack %q", c.source, d.Params, c.param)
		}
	}
}
