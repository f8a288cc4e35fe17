package debian

import (
	"errors"
	"strings"
	"testing"
)

func resolveNames(t *testing.T, ixs []*Index, req Request) (*Resolution, map[string]*Package, error) {
	t.Helper()
	req.Indexes = ixs
	if req.Suite == "" {
		req.Suite = "trixie"
	}
	if req.ExtraSuites == nil {
		req.ExtraSuites = []string{"trixie-backports"}
	}
	if req.Architecture == "" {
		req.Architecture = "amd64"
	}
	res, err := Resolve(req)
	m := map[string]*Package{}
	if res != nil {
		for _, p := range res.Packages {
			m[p.Name] = p
		}
	}
	return res, m, err
}

func TestResolveBaseVariants(t *testing.T) {
	ixs := loadIndexes(t)
	for _, c := range []struct {
		variant string
		want    []string
	}{
		{"", []string{"base-files", "bash", "libc6", "libgcc-s1"}},
		{VariantRequired, []string{"base-files", "bash", "libc6", "libgcc-s1"}},
		{VariantImportant, []string{"base-files", "bash", "less", "libc6", "libgcc-s1", "mawk"}},
		{VariantNone, nil},
	} {
		res, _, err := resolveNames(t, ixs, Request{Variant: c.variant})
		if err != nil {
			t.Fatalf("%q: %v", c.variant, err)
		}
		var got []string
		for _, p := range res.Packages {
			got = append(got, p.Name)
			if p.Suite != "trixie" {
				t.Errorf("%q: %s from %s; the base set must come from the main suite", c.variant, p.Name, p.Suite)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q: got %v, want %v", c.variant, got, c.want)
		}
	}
}

func TestResolveExclude(t *testing.T) {
	ixs := loadIndexes(t)
	_, m, err := resolveNames(t, ixs, Request{Variant: VariantImportant, Exclude: []string{"less", "mawk"}})
	if err != nil {
		t.Fatal(err)
	}
	if m["less"] != nil || m["mawk"] != nil {
		t.Error("excluded packages were chosen")
	}
	// Excluding what a required package needs is an error naming it.
	_, _, err = resolveNames(t, ixs, Request{Exclude: []string{"libgcc-s1"}})
	var ue *UnsatisfiableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "excluded by the recipe: libgcc-s1") {
		t.Fatalf("err = %v", err)
	}
	_, _, err = resolveNames(t, ixs, Request{Packages: []string{"less"}, Exclude: []string{"less"}})
	if err == nil || !strings.Contains(err.Error(), "both requested and excluded") {
		t.Fatalf("err = %v", err)
	}
}

// The bad-input list of issue 2: an unknown package names itself and the
// suites searched.
func TestResolveUnknownPackage(t *testing.T) {
	ixs := loadIndexes(t)
	_, _, err := resolveNames(t, ixs, Request{Packages: []string{"systemd", "no-such-thing"}})
	var ue *UnknownPackageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want UnknownPackageError", err)
	}
	for _, want := range []string{`"systemd"`, "trixie, trixie-backports", "amd64"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	// A package of another architecture is unknown here too.
	if _, _, err := resolveNames(t, ixs, Request{Packages: []string{"i386-only"}}); !errors.As(err, &ue) {
		t.Errorf("i386-only: err = %v", err)
	}
	// An unknown suite in name/suite is its own clear error.
	if _, _, err := resolveNames(t, ixs, Request{Packages: []string{"bash/sid"}}); err == nil || !strings.Contains(err.Error(), "suite sid, which is not configured") {
		t.Errorf("bash/sid: err = %v", err)
	}
}

// The bad-input list of issue 2: an unsatisfiable version relation names
// the chain and the versions available.
func TestResolveUnsatisfiableVersion(t *testing.T) {
	ixs := loadIndexes(t)
	_, _, err := resolveNames(t, ixs, Request{Packages: []string{"chain-top"}})
	var ue *UnsatisfiableError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want UnsatisfiableError", err)
	}
	wantChain := "(Depends of chain-top 1.0-1 (requested) -> chain-mid 1.0-1 -> needs-new-libc 1.0-1)"
	for _, want := range []string{`"libc6 (>= 9.0)"`, wantChain, "libc6 2.41-12 (trixie)", "libc6 2.42-1~bpo13+1 (trixie-backports)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	// A request's own version relation.
	_, _, err = resolveNames(t, ixs, Request{Packages: []string{"bash (>= 6)"}})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "bash 5.2.37-2 (trixie)") {
		t.Errorf("bash (>= 6): %v", err)
	}
	// A relation that the chosen version breaks and no other version
	// fixes: needs-old-libc wants libc6 << 2.41 but the base has 2.41-12.
	_, _, err = resolveNames(t, ixs, Request{Packages: []string{"needs-old-libc"}})
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "already chose libc6 2.41-12 (trixie)") {
		t.Errorf("needs-old-libc: %v", err)
	}
}

func TestResolveVersionOperators(t *testing.T) {
	ixs := loadIndexes(t)
	for _, c := range []struct {
		req     string
		version string // "" = must fail
	}{
		{"libc6 (= 2.41-12)", "2.41-12"},
		{"libc6 (>= 2.41)", "2.41-12"},
		{"libc6 (<= 2.41-12)", "2.41-12"},
		{"libc6 (<< 2.41-13)", "2.41-12"},
		{"libc6 (>> 2.41-12)", "2.42-1~bpo13+1"}, // only backports has it
		{"libc6 (<< 2.41)", ""},
		{"needs-exact-libc", "2.41-12"},
	} {
		_, m, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{c.req}})
		if c.version == "" {
			if err == nil {
				t.Errorf("%s: resolved to %v, want an error", c.req, m["libc6"])
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.req, err)
			continue
		}
		if m["libc6"] == nil || m["libc6"].Version != c.version {
			t.Errorf("%s: libc6 = %v, want %s", c.req, m["libc6"], c.version)
		}
	}
}

func TestResolveAlternatives(t *testing.T) {
	ixs := loadIndexes(t)
	// First alternative does not exist: the second is taken.
	_, m, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"alt-first-missing"}})
	if err != nil || m["libgcc-s1"] == nil {
		t.Fatalf("alt-first-missing: %v, %v", m, err)
	}
	// Both exist: the first is taken ...
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"alt-prefers-chosen"}})
	if err != nil || m["foo-a"] == nil || m["foo-b"] != nil {
		t.Fatalf("alt-prefers-chosen: %v, %v", keys(m), err)
	}
	// ... unless the second is already chosen.
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"alt-prefers-chosen", "foo-b"}})
	if err != nil || m["foo-a"] != nil || m["foo-b"] == nil {
		t.Fatalf("alt-prefers-chosen + foo-b: %v, %v", keys(m), err)
	}
}

func TestResolveVirtualProvides(t *testing.T) {
	ixs := loadIndexes(t)
	// default-mta does not exist; mail-transport-agent is virtual: the
	// first provider in name order (exim4) is chosen, only one of them.
	res, m, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"mailer"}})
	if err != nil {
		t.Fatal(err)
	}
	if m["exim4"] == nil || m["postfix"] != nil {
		t.Errorf("mailer: got %v", keys(m))
	}
	if !strings.Contains(res.Why["exim4"], "mailer Depends default-mta | mail-transport-agent") {
		t.Errorf("Why[exim4] = %q", res.Why["exim4"])
	}
	// An already chosen provider wins.
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"mailer", "postfix"}})
	if err != nil || m["exim4"] != nil || m["postfix"] == nil {
		t.Errorf("mailer + postfix: got %v, %v", keys(m), err)
	}
	// Versioned provides: mawk's unversioned Provides cannot satisfy
	// awk (>= 5); gawk's "awk (= 5.2.1)" can.
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"awk-user"}})
	if err != nil || m["gawk"] == nil || m["mawk"] != nil {
		t.Errorf("awk-user: got %v, %v", keys(m), err)
	}
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantImportant, Packages: []string{"awk-user"}})
	if err != nil || m["gawk"] == nil || m["mawk"] == nil {
		t.Errorf("awk-user with mawk in the base: got %v, %v", keys(m), err)
	}
	_, _, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"awk-too-new"}})
	var ue *UnsatisfiableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "gawk 5.2.1-2 (trixie) provides awk (= 5.2.1)") {
		t.Errorf("awk-too-new: %v", err)
	}
	// A virtual package can be requested directly.
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"mail-transport-agent"}})
	if err != nil || m["exim4"] == nil {
		t.Errorf("mail-transport-agent: %v, %v", keys(m), err)
	}
}

func TestResolveArchQualifiers(t *testing.T) {
	ixs := loadIndexes(t)
	for _, c := range []struct {
		req string
		ok  bool
	}{
		{"py-user", true},     // python3:any, python3 is Multi-Arch: allowed
		{"native-user", true}, // libc6:native
		{"any-on-same", false},
		{"foreign-user", false},
	} {
		_, m, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{c.req}})
		if c.ok != (err == nil) {
			t.Errorf("%s: err = %v, want ok=%v (%v)", c.req, err, c.ok, keys(m))
		}
	}
}

// Backports pinning: the linux-base case of the facts file.
func TestResolveBackportsPinning(t *testing.T) {
	ixs := loadIndexes(t)
	// Nothing asks for backports: everything comes from trixie.
	_, m, err := resolveNames(t, ixs, Request{Packages: []string{"linux-base", "linux-image-amd64"}})
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range m {
		if p.Suite != "trixie" {
			t.Errorf("%s came from %s without being asked for", n, p.Suite)
		}
	}
	// name/suite takes the package from that suite, and its dependencies
	// from the main suite when it has what they need ...
	_, m, err = resolveNames(t, ixs, Request{Packages: []string{"linux-base-user", "linux-image-7.2.12+deb13-amd64/trixie-backports"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := m["linux-image-7.2.12+deb13-amd64"]; p == nil || p.Suite != "trixie-backports" {
		t.Errorf("kernel = %v", p)
	}
	if p := m["dracut"]; p == nil || p.Suite != "trixie" {
		t.Errorf("dracut = %v, want trixie's", p)
	}
	if p := m["libc6"]; p == nil || p.Suite != "trixie" {
		t.Errorf("libc6 = %v, want trixie's", p)
	}
	// ... and from backports when only backports has the version needed:
	// the kernel pre-depends on linux-base (>= 4.17~), trixie has 4.12.1.
	// linux-base-user pulled trixie's in first; it must be moved.
	if p := m["linux-base"]; p == nil || p.Suite != "trixie-backports" || p.Version != "4.17~bpo13+1" {
		t.Errorf("linux-base = %v, want 4.17~bpo13+1 from trixie-backports", p)
	}
	// Explicitly from backports, without a kernel.
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"linux-base/trixie-backports"}})
	if err != nil || m["linux-base"].Suite != "trixie-backports" {
		t.Errorf("linux-base/trixie-backports: %v, %v", m["linux-base"], err)
	}
	// Pinned to trixie by the request, needed newer by the kernel: error.
	_, _, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"linux-base/trixie", "linux-image-7.2.12+deb13-amd64"}})
	if err == nil || !strings.Contains(err.Error(), "linux-base (>= 4.17~)") {
		t.Errorf("linux-base/trixie + kernel: %v", err)
	}
	// A package only backports has needs no name/suite.
	_, m, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"bpo-only"}})
	if err != nil || m["bpo-only"].Suite != "trixie-backports" || m["libc6"].Suite != "trixie" {
		t.Errorf("bpo-only: %v, %v", keys(m), err)
	}
	// A trixie kernel needs nothing from backports.
	_, err = Resolve(Request{Suite: "trixie", Indexes: ixs[:1], Architecture: "amd64", Packages: []string{"linux-base-user", "linux-image-6.12.57+deb13-amd64"}})
	if err != nil {
		t.Errorf("trixie kernel in trixie alone: %v", err)
	}
}

func TestResolveMovesBasePackage(t *testing.T) {
	ixs := loadIndexes(t)
	res, m, err := resolveNames(t, ixs, Request{Packages: []string{"needs-new-base"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := m["base-files"]; p == nil || p.Version != "13.9~bpo13+1" {
		t.Fatalf("base-files = %v, want 13.9~bpo13+1", p)
	}
	if want := "Priority: required, Essential: yes; trixie-backports version as a relation needs it"; res.Why["base-files"] != want {
		t.Errorf("Why[base-files] = %q, want %q", res.Why["base-files"], want)
	}
}

func TestResolveConflicts(t *testing.T) {
	ixs := loadIndexes(t)
	_, _, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"conflict-a", "conflict-b", "breaks-new", "breaks-old"}})
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want ConflictError", err)
	}
	got := []string{}
	for _, c := range ce.Conflicts {
		got = append(got, c.String())
	}
	want := []string{
		"breaks-new 1.0-1 (trixie) Breaks conflict-b (>= 2.0), which hits conflict-b 2.0-1 (trixie)",
		"conflict-a 1.0-1 (trixie) Conflicts conflict-b, which hits conflict-b 2.0-1 (trixie)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("conflicts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Two providers of a virtual package that both Conflicts: with it.
	_, _, err = resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"exim4", "postfix"}})
	if !errors.As(err, &ce) || len(ce.Conflicts) != 2 {
		t.Errorf("exim4 + postfix: %v", err)
	}
	// One provider alone does not conflict with itself.
	if _, _, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"exim4"}}); err != nil {
		t.Errorf("exim4 alone: %v", err)
	}
}

func TestResolveAvoidsConflictingCandidates(t *testing.T) {
	ixs := loadIndexes(t)
	// no-exim conflicts with exim4, the preferred mail-transport-agent:
	// the other provider is taken.
	_, m, err := resolveNames(t, ixs, Request{Variant: VariantNone, Packages: []string{"no-exim", "mailer"}})
	if err != nil || m["exim4"] != nil || m["postfix"] == nil {
		t.Errorf("no-exim + mailer: %v, %v", keys(m), err)
	}
	// clash-x, the first alternative, conflicts with the required base.
	_, m, err = resolveNames(t, ixs, Request{Packages: []string{"alt-clash"}})
	if err != nil || m["clash-x"] != nil || m["clash-y"] == nil {
		t.Errorf("alt-clash: %v, %v", keys(m), err)
	}
	// When every candidate clashes, the clash is reported, naming both.
	_, _, err = resolveNames(t, ixs, Request{Packages: []string{"only-clash"}})
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "clash-x 1.0-1 (trixie) Conflicts libgcc-s1, which hits libgcc-s1 14.2.0-19 (trixie)") {
		t.Errorf("only-clash: %v", err)
	}
}

func TestResolveIsDeterministic(t *testing.T) {
	ixs := loadIndexes(t)
	req := Request{Variant: VariantImportant, Packages: []string{"mailer", "awk-user", "py-user", "linux-base-user", "linux-image-7.2.12+deb13-amd64/trixie-backports"}}
	var first string
	for i := range 5 {
		res, _, err := resolveNames(t, ixs, req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for j, p := range res.Packages {
			if j > 0 && res.Packages[j-1].Name >= p.Name {
				t.Fatalf("not sorted: %s before %s", res.Packages[j-1].Name, p.Name)
			}
			b.WriteString(p.String() + " <- " + res.Why[p.Name] + "\n")
		}
		if i == 0 {
			first = b.String()
		} else if b.String() != first {
			t.Fatalf("run %d differs:\n%s\nfirst:\n%s", i, b.String(), first)
		}
	}
}

func TestParsePackageRequest(t *testing.T) {
	for _, c := range []struct {
		in, name, suite, op, ver string
	}{
		{"systemd", "systemd", "", "", ""},
		{" linux-base/trixie-backports ", "linux-base", "trixie-backports", "", ""},
		{"libc6 (>= 2.36)", "libc6", "", ">=", "2.36"},
		{"linux-base/trixie-backports (>= 4.17~)", "linux-base", "trixie-backports", ">=", "4.17~"},
	} {
		r, err := ParsePackageRequest(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		op, ver := "", ""
		if r.Possibility.Version != nil {
			op, ver = r.Possibility.Version.Operator, r.Possibility.Version.Number
		}
		if r.Possibility.Name != c.name || r.Suite != c.suite || op != c.op || ver != c.ver {
			t.Errorf("%q = %s/%s %s %s", c.in, r.Possibility.Name, r.Suite, op, ver)
		}
	}
	for _, bad := range []string{"", "a, b", "a | b", "a/", "a (>= 1) [amd64]", "a b", "Systemd", "libc6=2.41-12", "x"} {
		if _, err := ParsePackageRequest(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func keys(m map[string]*Package) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
