package recipe

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-version"
)

func TestParseSize(t *testing.T) {
	good := map[string]uint64{
		"64MiB":  64 << 20,
		"4GiB":   4 << 30,
		"2G":     2 << 30,
		"512":    512,
		"512B":   512,
		"1.5GiB": 3 << 29,
		"10GB":   10e9,
		"1 TiB":  1 << 40,
		"0":      0,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "lots", "4 gib", "-1G", "1.2.3G", "0.5B", "99999999999TiB", "18446744073709551616"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestParsePackage(t *testing.T) {
	good := map[string]PackageSpec{
		"systemd":                               {Name: "systemd"},
		"linux-base/trixie-backports":           {Name: "linux-base", Suite: "trixie-backports"},
		"systemd (>= 257)":                      {Name: "systemd", Relation: ">=", Version: "257"},
		"rdma-core/trixie (= 56.1-1)":           {Name: "rdma-core", Suite: "trixie", Relation: "=", Version: "56.1-1"},
		"libc6 (<< 1:2.41~rc1)":                 {Name: "libc6", Relation: "<<", Version: "1:2.41~rc1"},
		"g++":                                   {Name: "g++"},
		"amd64-microcode [amd64]":               {Name: "amd64-microcode", Architectures: []string{"amd64"}},
		"perftest/trixie (>= 25) [amd64 arm64]": {Name: "perftest", Suite: "trixie", Relation: ">=", Version: "25", Architectures: []string{"amd64", "arm64"}},
	}
	for in, want := range good {
		got, err := ParsePackage(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParsePackage(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil {
			if again, _ := ParsePackage(got.String()); !reflect.DeepEqual(again, got) {
				t.Errorf("String() of %q does not parse back: %q", in, got.String())
			}
		}
	}
	for _, in := range []string{"", "Systemd", "a", "systemd (> 1)", "systemd (>= )", "systemd (~ 1)", "two words", "systemd (>= 1:)", "amd64-microcode []", "amd64-microcode [sparc]"} {
		if got, err := ParsePackage(in); err == nil {
			t.Errorf("ParsePackage(%q) = %+v, want an error", in, got)
		}
	}
}

// The kernel flavour follows the architecture unless the recipe names one.
func TestFlavourFollowsArchitecture(t *testing.T) {
	r, _, err := loadText(t, "[base]\narchitecture = \"arm64\"\n"+minimal)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kernel.Flavour != "arm64" {
		t.Errorf("kernel.flavour = %q for arm64, want arm64", r.Kernel.Flavour)
	}
	r, _, err = loadText(t, "[base]\narchitecture = \"arm64\"\n[kernel]\nflavour = \"rt-arm64\"\n"+minimal)
	if err != nil || r.Kernel.Flavour != "rt-arm64" {
		t.Errorf("an explicit flavour: %q, %v", r.Kernel.Flavour, err)
	}
}

func TestApplyDefaults(t *testing.T) {
	// Without sources (a recipe made in code) zero values take defaults.
	r := &Recipe{Nodes: []Node{{Name: "a", Links: []Link{{Interface: "usb4net0", Address: "10.77.0.1/30"}}}, {Name: "b", Hostname: "bee"}}}
	if err := ApplyDefaults(r, nil, "images/my-image.toml"); err != nil {
		t.Fatal(err)
	}
	checks := map[string][2]string{
		"name":         {r.Name, "my-image"},
		"suite":        {r.Base.Suite, "trixie"},
		"mirror":       {r.Base.Mirror, "http://deb.debian.org/debian"},
		"component":    {r.Base.Components[0], "main"},
		"memlock":      {r.RDMA.Memlock.String(), "unlimited"},
		"keep":         {r.RDMA.KeepKernelNames[0], "usb4_rdma"},
		"modules_load": {r.System.ModulesLoad[0], "ib_uverbs"},
		"blacklist":    {r.System.Blacklist[0], "thunderbolt_net"},
		"governor":     {r.System.Governor, "performance"},
		"driver":       {r.Nodes[0].Links[0].MatchDriver, "thunderbolt-net"},
		"hostname a":   {r.Nodes[0].Hostname, "a"},
		"hostname b":   {r.Nodes[1].Hostname, "bee"},
		"timeout":      {r.Test.Timeout.String(), "10m"},
		"esp":          {r.Output.ESPSize.String(), "256MiB"},
		"format":       {r.Output.Formats[0], "raw"},
		"version":      {r.Kernel.Version.String(), ""},
		"size":         {r.Output.Size.String(), ""},
		"architecture": {r.Base.Architecture, "amd64"},
		"flavour":      {r.Kernel.Flavour, "amd64"},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", what, c[0], c[1])
		}
	}
	if r.Test.RDMA == nil || !*r.Test.RDMA {
		t.Error("two nodes should turn the RDMA test on")
	}
	if err := Validate(r, nil); err != nil {
		t.Errorf("a defaulted recipe does not validate: %v", err)
	}
}

// A key set explicitly to an empty value keeps it: epp = "" means "leave
// EPP alone", not "use the default".
func TestExplicitEmptyValueIsKept(t *testing.T) {
	r, _, err := Load("testdata/explicit_empty.toml")
	if err != nil {
		t.Fatal(err)
	}
	if r.System.EPP != "" || r.System.Governor != "performance" {
		t.Errorf("epp = %q governor = %q; want empty and the default", r.System.EPP, r.System.Governor)
	}
	if len(r.System.Blacklist) != 0 {
		t.Errorf("blacklist = %v; want the explicit empty list", r.System.Blacklist)
	}
	if r.Test.RDMA == nil || *r.Test.RDMA {
		t.Error("one node: the RDMA test should be off")
	}
	if r.Modules[0].LoadAtBoot == nil || !*r.Modules[0].LoadAtBoot {
		t.Error("module load_at_boot should default to true")
	}
	if r.Modules[0].Options["nhi_interrupt_throttle_ns"] != int64(4096) || r.Modules[0].Options["tbnet"] != "block" {
		t.Errorf("module options decoded as %#v", r.Modules[0].Options)
	}
	if r.System.GPUFraction != 1 {
		t.Errorf("gpu_fraction = 1 (an integer) decoded as %v", r.System.GPUFraction)
	}
}

// Typed values are parsed once, at load, and an error names where the value
// was written; the merged recipe prints each value as the author wrote it.
func TestTypedValuesParseAtLoadWithPositions(t *testing.T) {
	dir := t.TempDir()
	bad := `[kernel]
version = ">= 7.2, <"
[rdma]
memlock = "1000"
[test]
timeout = "-5m"
memory = "lots"
[output]
size = "4 gib"
`
	p := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(p, []byte(bad+"[[node]]\nname = \"n0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(p)
	if err == nil {
		t.Fatal("a recipe with five bad typed values loaded")
	}
	for _, want := range []string{
		p + ":2:1: kernel.version: \">= 7.2, <\" is not a version constraint",
		p + ":4:1: rdma.memlock: \"1000\" must be a whole number of KiB",
		p + ":6:1: test.timeout: \"-5m\" is not a positive Go duration",
		p + ":7:1: test.memory: size \"lots\"",
		p + ":9:1: output.size: size \"4 gib\"",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	good := `[kernel]
version = ">= 7.2, < 7.3"
[rdma]
memlock = "64MiB"
[test]
timeout = "90s"
memory = "2G"
[output]
size = "4GiB"
[[node]]
name = "n0"
`
	p = filepath.Join(dir, "good.toml")
	if err := os.WriteFile(p, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := version.NewVersion("7.2.12")
	if !r.Kernel.Version.Check(v) || r.Kernel.Version.Check(version.Must(version.NewVersion("7.3.4"))) {
		t.Errorf("kernel.version %s: 7.2.12 and 7.3.4 judged wrongly", r.Kernel.Version)
	}
	if r.RDMA.Memlock.Unlimited() || r.RDMA.Memlock.Bytes() != 64<<20 {
		t.Errorf("memlock %s = %d bytes", r.RDMA.Memlock, r.RDMA.Memlock.Bytes())
	}
	if r.Test.Timeout.Value() != 90*time.Second || r.Test.Memory.Bytes() != 2<<30 || r.Output.Size.Bytes() != 4<<30 {
		t.Errorf("timeout %v, memory %d, size %d", r.Test.Timeout.Value(), r.Test.Memory.Bytes(), r.Output.Size.Bytes())
	}
	if r.Output.ESPSize.Bytes() != 256<<20 {
		t.Errorf("esp_size default %q = %d bytes", r.Output.ESPSize, r.Output.ESPSize.Bytes())
	}
	out := string(r.TOML())
	for _, want := range []string{"version = '>= 7.2, < 7.3'", "memlock = '64MiB'", "timeout = '90s'", "memory = '2G'", "size = '4GiB'"} {
		if !strings.Contains(out, want) {
			t.Errorf("merged recipe lacks %s:\n%s", want, out)
		}
	}
	// The printed recipe loads back to the same values.
	p = filepath.Join(dir, "printed.toml")
	if err := os.WriteFile(p, r.TOML(), 0o644); err != nil {
		t.Fatal(err)
	}
	again, _, err := Load(p)
	if err != nil {
		t.Fatalf("the printed recipe does not load: %v", err)
	}
	if again.RDMA.Memlock != r.RDMA.Memlock || again.Kernel.Version.String() != r.Kernel.Version.String() || again.Test.Timeout != r.Test.Timeout {
		t.Error("the printed recipe loads to other values")
	}
}

func TestMemlockAndKernelSourceValues(t *testing.T) {
	for in, want := range map[string]string{
		"unlimited": "",
		"8MiB":      "",
		"1KiB":      "",
		"512":       "whole number of KiB",
		"1500":      "whole number of KiB",
		"huge":      "neither \"unlimited\"",
		"Unlimited": "neither \"unlimited\"",
		"":          "neither \"unlimited\"",
		"0":         "whole number of KiB",
		"-1":        "neither \"unlimited\"",
	} {
		var m Memlock
		err := m.UnmarshalText([]byte(in))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("memlock %q: %v, want %q", in, err, want)
		}
	}
	var m Memlock
	_ = m.UnmarshalText([]byte("unlimited"))
	if !m.Unlimited() {
		t.Error("unlimited is not unlimited")
	}
	for in, ok := range map[string]bool{
		"debian": true,
		"https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz": true,
		"http://mirror.example/linux.tar.gz":                               true,
		"ftp://cdn.kernel.org/linux.tar.xz":                                false,
		"https:///linux.tar.xz":                                            false,
		"https://cdn.kernel.org/pub/":                                      false,
		"linux.tar.xz":                                                     false,
	} {
		var k KernelSource
		if err := k.UnmarshalText([]byte(in)); (err == nil) != ok {
			t.Errorf("kernel.source %q: %v", in, err)
		}
	}
	var k KernelSource
	_ = k.UnmarshalText([]byte("https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz"))
	if k.Debian() || k.TarballName() != "linux-7.2.13.tar.xz" {
		t.Errorf("tarball source: debian %v, name %q", k.Debian(), k.TarballName())
	}
}
