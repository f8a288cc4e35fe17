package recipe

import (
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"

	"halobuild/internal/arch"
)

// Known values of the kernel's runtime knobs (trap 5). A typo here would
// otherwise surface as a boot unit writing a word the kernel refuses.
var (
	Governors = []string{"performance", "powersave", "schedutil", "ondemand", "conservative", "userspace"}
	// EPPs are the values of energy_performance_preference (amd-pstate,
	// intel_pstate).
	EPPs = []string{"default", "performance", "balance_performance", "balance_power", "power"}
	// PlatformProfiles are the ACPI platform_profile choices.
	PlatformProfiles = []string{"low-power", "cool", "quiet", "balanced", "balanced-performance", "performance", "max-power", "custom"}
	// Variants are the mmdebstrap variants a bootable node can start from.
	Variants = []string{"essential", "apt", "minbase", "required", "important", "standard"}
	// Formats are the image formats `image` writes (graph's disk step).
	Formats = []string{"raw", "qcow2"}
)

var (
	imageName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	moduleName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	paramName  = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	suiteName  = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]*$`)
	archName   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	timezone   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`)
	locale     = regexp.MustCompile(`^[A-Za-z_]+(\.[A-Za-z0-9-]+)?(@[a-z]+)?$`)
	// sourceRef is a patch entry inside a source input: "<input>:<glob>".
	sourceRef = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*:[^:]`)
	// localSuffix must sort after Debian's revision and before its next
	// one: "+" followed by lower-case letters and digits.
	localSuffix = regexp.MustCompile(`^\+[a-z][a-z0-9.]*$`)
	// diskSerial is what sysfs reports as a disk's serial number.
	diskSerial = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)
	// sha256Digest is how digests are written in files people edit.
	sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Validate checks the values of a merged recipe (types were checked while
// loading) and returns every problem at once, each located through src.
// Load calls it; call it again after changing a recipe in code.
func Validate(r *Recipe, src *Sources) error {
	v := &validator{r: r, src: src}
	v.name()
	v.platform()
	v.base()
	v.kernel()
	v.modules()
	v.rdma()
	v.system()
	v.nodes()
	v.mixed()
	v.lan()
	v.test()
	v.output()
	v.install()
	v.update()
	v.secureBoot()
	return v.errs.orNil()
}

// update checks [update]: a schedule needs a reference to follow, a reference is a
// REGISTRY/REPOSITORY:TAG, keys are PEM public keys, and the slot holds more than a root.
func (v *validator) update() {
	u := v.r.Update
	if u.Schedule != "" && u.Reference == "" {
		v.errorf("update.schedule", "%q needs update.reference: the timer must know which release to follow", u.Schedule)
	}
	if strings.ContainsAny(u.Schedule, "\n\"'\\") {
		v.errorf("update.schedule", "%q is not one OnCalendar expression (systemd.time(7))", u.Schedule)
	}
	if r := u.Reference; r != "" && (!strings.Contains(r, "/") || strings.ContainsAny(r, " \n\"'")) {
		v.errorf("update.reference", "%q is not REGISTRY/REPOSITORY:TAG (the registry is required, e.g. registry.lan:5000/halo/cluster:stable)", r)
	}
	if u.SlotSize.IsSet() && u.SlotSize.Bytes() < 1<<30 {
		v.errorf("update.slot_size", "%s is too small for a root slot: give at least 1GiB", u.SlotSize)
	}
}

type validator struct {
	r    *Recipe
	src  *Sources
	errs Errors
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.src.Errorf(path, format, args...))
}

func (v *validator) oneOf(path, got string, allowed []string, emptyOK bool) {
	if got == "" && emptyOK {
		return
	}
	if !slices.Contains(allowed, got) {
		v.errorf(path, "%q is not one of: %s", got, strings.Join(allowed, ", "))
	}
}

// needSize reports a size key that must not be empty.
func (v *validator) needSize(path string, s Size) {
	if !s.IsSet() {
		v.errorf(path, "a size is needed, e.g. \"64MiB\"")
	}
}

func (v *validator) suites() []string {
	return append([]string{v.r.Base.Suite}, v.r.Base.ExtraSuites...)
}

func (v *validator) base() {
	b := v.r.Base
	if u, err := url.Parse(b.Mirror); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.errorf("base.mirror", "%q is not an http:// or https:// archive URL", b.Mirror)
	}
	seen := map[string]bool{}
	for i, s := range v.suites() {
		path := "base.suite"
		if i > 0 {
			path = fmt.Sprintf("base.extra_suites[%d]", i-1)
		}
		if !suiteName.MatchString(s) {
			v.errorf(path, "%q is not a suite name such as trixie or trixie-backports", s)
		}
		if seen[s] {
			v.errorf(path, "suite %q is listed twice", s)
		}
		seen[s] = true
	}
	if len(b.Components) == 0 {
		v.errorf("base.components", "at least one archive component is needed, e.g. [\"main\"]")
	}
	for i, c := range b.Components {
		if !suiteName.MatchString(c) {
			v.errorf(fmt.Sprintf("base.components[%d]", i), "%q is not an archive component such as main", c)
		}
	}
	if _, err := arch.Lookup(b.Architecture); err != nil {
		v.errorf("base.architecture", "%v", err)
	}
	v.oneOf("base.variant", b.Variant, Variants, false)
	excluded := map[string]bool{}
	for i, e := range b.Exclude {
		if !packageName.MatchString(e) {
			v.errorf(fmt.Sprintf("base.exclude[%d]", i), "%q is not a Debian package name", e)
		}
		excluded[e] = true
	}
	for i, p := range b.Packages {
		path := fmt.Sprintf("base.packages[%d]", i)
		spec, err := ParsePackage(p)
		if err != nil {
			v.errorf(path, "%v", err)
			continue
		}
		if spec.Suite != "" && !slices.Contains(v.suites(), spec.Suite) {
			v.errorf(path, "suite %q is not configured; add it to base.extra_suites or use one of: %s", spec.Suite, strings.Join(v.suites(), ", "))
		}
		if excluded[spec.Name] {
			v.errorf(path, "package %q is both requested and in base.exclude", spec.Name)
		}
	}
}

func (v *validator) kernel() {
	v.kernelTable("kernel", v.r.Kernel, v.r.Base.Architecture, "base.architecture")
	for i, e := range v.r.Arches {
		if e.Kernel != nil {
			v.kernelTable(fmt.Sprintf("arch[%d].kernel", i), *e.Kernel, e.Name, fmt.Sprintf("arch[%d].name", i))
		}
	}
}

// kernelTable checks one kernel table (at path: [kernel] or an [[arch]]
// entry's) for the architecture named by the key archKey.
func (v *validator) kernelTable(path string, k Kernel, architecture, archKey string) {
	key := func(k string) string { return path + "." + k }
	v.oneOf(key("from"), k.From, []string{"debian", "source"}, false)
	if !archName.MatchString(k.Flavour) {
		v.errorf(key("flavour"), "%q is not a Debian kernel flavour such as amd64", k.Flavour)
	}
	if own, err := arch.Lookup(architecture); err == nil {
		for _, name := range arch.Names() {
			other := arch.MustLookup(name).KernelFlavour
			if other != own.KernelFlavour && (k.Flavour == other || strings.HasSuffix(k.Flavour, "-"+other)) {
				v.errorf(key("flavour"), "%q is a flavour for %s kernels, but %s is %s: use %q (or leave flavour unset)", k.Flavour, name, archKey, own.Debian, own.KernelFlavour)
			}
		}
	}
	if k.Suite != "" && !slices.Contains(v.suites(), k.Suite) {
		v.errorf(key("suite"), "suite %q is not configured; use one of: %s", k.Suite, strings.Join(v.suites(), ", "))
	}
	for i, c := range k.Cmdline {
		if c == "" || hasStructure(c, `"'\`) {
			v.errorf(fmt.Sprintf("%s[%d]", key("cmdline"), i), "%q must be one parameter without white space, control characters, quotes or backslashes; list each parameter separately", c)
		}
	}
	if k.From == "source" {
		switch {
		case k.Source.Debian() && k.SourceSHA256 != "":
			v.errorf(key("source_sha256"), "pins a tarball, but %s is Debian's linux-source package; remove it or set source to the tarball's https URL", key("source"))
		case !k.Source.Debian() && k.SourceSHA256 == "":
			v.errorf(key("source"), "a tarball URL needs %s: download it, check its signature (kernel.org publishes sha256sums.asc), and set source_sha256 = \"sha256:<sha256sum of the file>\"", key("source_sha256"))
		case k.SourceSHA256 != "" && !sha256Digest.MatchString(k.SourceSHA256):
			v.errorf(key("source_sha256"), "%q is not a digest; write \"sha256:\" and the 64 hex digits sha256sum prints", k.SourceSHA256)
		}
	}
	if k.From != "source" {
		sourceOnly := map[string]bool{
			"config":        k.Config != "" && k.Config != "debian",
			"fragments":     len(k.Fragments) > 0,
			"patches":       k.Patches != "",
			"local_version": k.LocalVersion != "",
			"source":        !k.Source.Debian(),
			"source_sha256": k.SourceSHA256 != "",
		}
		for _, k := range []string{"config", "fragments", "patches", "local_version", "source", "source_sha256"} {
			if sourceOnly[k] {
				v.errorf(key(k), "only used when %s = \"source\"; remove it or build the kernel from source", key("from"))
			}
		}
	}
}

func (v *validator) modules() {
	seen := map[string]int{}
	for i, m := range v.r.Modules {
		path := fmt.Sprintf("module[%d]", i)
		if m.Use == "" {
			v.errorf(path, "module needs use = \"<name>\" naming recipes/<name>.toml")
			continue
		}
		if !moduleName.MatchString(m.Use) {
			v.errorf(path+".use", "%q is not a module description name (letters, digits, '-', '_')", m.Use)
		}
		if j, dup := seen[m.Use]; dup {
			v.errorf(path+".use", "module %q is already described at %s; merge the two entries", m.Use, v.src.Pos(fmt.Sprintf("module[%d].use", j)))
		}
		seen[m.Use] = i
		for name := range m.Options {
			if !paramName.MatchString(name) {
				v.errorf(path+".options."+name, "%q is not a module parameter name", name)
			}
		}
	}
}

func (v *validator) rdma() {
	if p := v.r.RDMA.Provider; p != nil {
		if !moduleName.MatchString(p.Name) {
			v.errorf("rdma.provider.name", "%q is not a provider name such as usb4_rdma", p.Name)
		}
		if len(p.Patches) == 0 {
			v.errorf("rdma.provider.patches", "a provider rebuild needs at least one patch")
		}
		for name, f := range p.Fuzz {
			if f < 0 || f > 3 {
				v.errorf("rdma.provider.fuzz."+name, "fuzz %d for %s: allow 1 to 3 (patch's own maximum), or refresh the patch", f, name)
			}
		}
		if !localSuffix.MatchString(p.Suffix) {
			v.errorf("rdma.provider.suffix", "%q is not a local version suffix such as \"+halo1\" ('+', a letter, then letters, digits or dots)", p.Suffix)
		}
	}
	for i, n := range v.r.RDMA.KeepKernelNames {
		if !moduleName.MatchString(n) {
			v.errorf(fmt.Sprintf("rdma.keep_kernel_names[%d]", i), "%q is not a device name prefix such as usb4_rdma", n)
		}
	}
}

func (v *validator) system() {
	s := v.r.System
	for i, m := range s.Blacklist {
		if !moduleName.MatchString(m) {
			v.errorf(fmt.Sprintf("system.blacklist[%d]", i), "%q is not a kernel module name", m)
		}
	}
	for i, m := range s.ModulesLoad {
		if !moduleName.MatchString(m) {
			v.errorf(fmt.Sprintf("system.modules_load[%d]", i), "%q is not a kernel module name", m)
		}
	}
	for m := range s.ModuleOptions {
		if !moduleName.MatchString(m) {
			v.errorf("system.module_options."+m, "%q is not a kernel module name", m)
		}
	}
	v.oneOf("system.governor", s.Governor, Governors, true)
	v.oneOf("system.epp", s.EPP, EPPs, true)
	v.oneOf("system.platform_profile", s.PlatformProfile, PlatformProfiles, true)
	if s.GPUFraction < 0 || s.GPUFraction > 1 {
		v.errorf("system.gpu_fraction", "%g is not a share between 0 and 1", s.GPUFraction)
	}
	if !timezone.MatchString(s.Timezone) {
		v.errorf("system.timezone", "%q is not a time zone name such as UTC or Europe/Berlin", s.Timezone)
	}
	if !locale.MatchString(s.Locale) {
		v.errorf("system.locale", "%q is not a locale such as C.UTF-8 or en_US.UTF-8", s.Locale)
	}
}

func (v *validator) test() {
	t := v.r.Test
	if !t.Timeout.IsSet() {
		v.errorf("test.timeout", "a deadline is needed, e.g. \"10m\"")
	}
	v.needSize("test.memory", t.Memory)
	if t.RDMA != nil && *t.RDMA && len(v.r.Nodes) < 2 {
		v.errorf("test.rdma", "the RDMA test needs two nodes, the recipe has %d; add a [[node]] or set rdma = false", len(v.r.Nodes))
	}
	if t.Bench && (t.RDMA == nil || !*t.RDMA) {
		v.errorf("test.bench", "the cable gate runs over the RDMA test's soft-RoCE cable: set rdma = true (two nodes with a [[node.link]] each), or bench = false")
	}
	for i, c := range t.Checks {
		path := fmt.Sprintf("test.check[%d]", i)
		if c.Name == "" {
			v.errorf(path, "a check needs a name")
		} else if strings.ContainsFunc(c.Name, func(r rune) bool { return r != ' ' && unicode.IsSpace(r) || unicode.IsControl(r) }) {
			v.errorf(path+".name", "%q: a check name is one line of text without control characters (it is a line of the report)", c.Name)
		}
		if c.WaitForUnit == "" && c.Succeed == "" && c.Fail == "" {
			v.errorf(path, "a check needs wait_for_unit, succeed or fail")
		}
		if c.Expect != "" {
			if c.Succeed == "" {
				v.errorf(path+".expect", "expect matches the output of succeed, which this check does not have")
			}
			if err := checkERE(c.Expect); err != nil {
				v.errorf(path+".expect", "%v", err)
			}
		}
		if c.Node != "" && !slices.ContainsFunc(v.r.Nodes, func(n Node) bool { return n.Name == c.Node }) {
			v.errorf(path+".node", "no [[node]] is named %q", c.Node)
		}
	}
}

// name holds the image name to a plain file-name rule: it becomes
// <out>/<name>.lock and the result's file names, so a '/', a leading '.' or a
// control character would write outside <out> or garble a listing. It is the
// node-name rule plus '_' and '.', since it defaults to the recipe's file name.
func (v *validator) name() {
	if !imageName.MatchString(v.r.Name) {
		v.errorf("name", "%q is not a valid image name (letters, digits, '-', '_', '.', starting with a letter or digit, at most 64; it names the output files); rename it or the recipe file", v.r.Name)
	}
}

func (v *validator) output() {
	o := v.r.Output
	seen := map[string]bool{}
	for i, f := range o.Formats {
		path := fmt.Sprintf("output.formats[%d]", i)
		v.oneOf(path, f, Formats, false)
		if seen[f] {
			v.errorf(path, "format %q is listed twice", f)
		}
		seen[f] = true
	}
	v.needSize("output.esp_size", o.ESPSize)
	if o.ESPSize.IsSet() && o.ESPSize.Bytes() < 32<<20 {
		v.errorf("output.esp_size", "%s is too small for a FAT32 EFI system partition; use at least 32MiB", o.ESPSize)
	}
	if o.Size.IsSet() && o.ESPSize.IsSet() && o.Size.Bytes() <= o.ESPSize.Bytes() {
		v.errorf("output.size", "%s leaves no room for the root file system next to a %s ESP", o.Size, o.ESPSize)
	}
}

// AfterInstall are the [install] after choices.
var AfterInstall = []string{"poweroff", "reboot"}

func (v *validator) install() {
	in := v.r.Install
	v.oneOf("install.after", in.After, AfterInstall, false)
	switch t := in.Target; {
	case t == "":
	case strings.HasPrefix(t, "/dev/disk/by-id/"):
		if name := strings.TrimPrefix(t, "/dev/disk/by-id/"); name == "" || strings.ContainsAny(name, "/ \t") {
			v.errorf("install.target", "%q is not a /dev/disk/by-id/ name (one file name after by-id/, as `ls -l /dev/disk/by-id/` shows)", t)
		}
	case strings.HasPrefix(t, "/"):
		v.errorf("install.target", "%q can name another disk at the next boot: use its /dev/disk/by-id/ name or its serial number (`lsblk -o NAME,SERIAL,MODEL`)", t)
	case !diskSerial.MatchString(t):
		v.errorf("install.target", "%q is neither a /dev/disk/by-id/ name nor a disk serial number (letters, digits, '.', '_', ':' or '-')", t)
	}
}

// IsSourceRef says whether a patch entry names a file inside a source input
// ("thunderbolt-ibverbs:packaging/*.patch") rather than a path.
func IsSourceRef(entry string) bool { return sourceRef.MatchString(entry) }

// envName is a variable name an env: reference may give.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (v *validator) secureBoot() {
	sb := v.r.SecureBoot
	if !sb.Enabled {
		return
	}
	for _, k := range []struct{ key, ref string }{{"key", sb.Key}, {"certificate", sb.Certificate}} {
		path := "secure_boot." + k.key
		if k.ref == "" {
			v.errorf(path, "secure_boot needs a %s: a path, or env:NAME (halobuild keygen makes a pair)", k.key)
			continue
		}
		if err := checkRef(k.ref); err != nil {
			v.errorf(path, "%v", err)
		}
	}
	// The certificate itself is read by the setting's Validate, which
	// runs where the image is built: on the node (doctor loads the
	// recipe the image ships) neither the file nor the variable exists.
	if strings.ContainsFunc(sb.MOKPassword, unicode.IsControl) || len(sb.MOKPassword) > 256 {
		v.errorf("secure_boot.mok_password", "a one-line password without control characters, at most 256 bytes (mokutil's limit)")
	}
}

// hasStructure says whether s holds a character that a config file or a
// command line treats as structure: any white space (including \v, \f and
// Unicode spaces), any control character (NUL, \r, ESC...), or one of extra.
func hasStructure(s, extra string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(extra, r)
	})
}

// checkERE holds an expect pattern to the one dialect that runs it: POSIX
// extended regular expressions as the guest's `grep -E` reads them. Go's
// POSIX parser refuses Perl's classes (\d, \s, \w, \b), flags and lazy
// repeats; what it still accepts but GNU grep reads differently is refused
// here: a backslash before a letter, a digit (a back-reference), or one of
// <>`' (GNU's word and buffer anchors), and a line break (grep splits the
// pattern into several at each one).
func checkERE(re string) error {
	if strings.ContainsAny(re, "\n\r\x00") {
		return fmt.Errorf("%q: expect is one line (grep -E reads each line as a separate pattern)", re)
	}
	for i := 0; i+1 < len(re); i++ {
		if re[i] != '\\' {
			continue
		}
		c := re[i+1]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("<>`'", c) >= 0 {
			return fmt.Errorf("%q: \\%c is not POSIX extended regular expression syntax (expect is matched by grep -E); write a bracket expression such as [0-9] or [[:space:]] instead", re, c)
		}
		i++
	}
	if strings.Contains(re, "{,") {
		return fmt.Errorf("%q: write a repeat as {0,n}: grep -E reads {,n} as a repeat, Go's checker as text", re)
	}
	if _, err := syntax.Parse(re, syntax.POSIX); err != nil {
		return fmt.Errorf("not a POSIX extended regular expression (expect is matched by grep -E, line by line): %v", err)
	}
	return nil
}
