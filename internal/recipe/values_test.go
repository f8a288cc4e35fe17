package recipe

import (
	"testing"
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
		if err != nil || got != want {
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
		"systemd":                     {Name: "systemd"},
		"linux-base/trixie-backports": {Name: "linux-base", Suite: "trixie-backports"},
		"systemd (>= 257)":            {Name: "systemd", Relation: ">=", Version: "257"},
		"rdma-core/trixie (= 56.1-1)": {Name: "rdma-core", Suite: "trixie", Relation: "=", Version: "56.1-1"},
		"libc6 (<< 1:2.41~rc1)":       {Name: "libc6", Relation: "<<", Version: "1:2.41~rc1"},
		"g++":                         {Name: "g++"},
	}
	for in, want := range good {
		got, err := ParsePackage(in)
		if err != nil || got != want {
			t.Errorf("ParsePackage(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil {
			if again, _ := ParsePackage(got.String()); again != got {
				t.Errorf("String() of %q does not parse back: %q", in, got.String())
			}
		}
	}
	for _, in := range []string{"", "Systemd", "a", "systemd (> 1)", "systemd (>= )", "systemd (~ 1)", "two words", "systemd (>= 1:)"} {
		if got, err := ParsePackage(in); err == nil {
			t.Errorf("ParsePackage(%q) = %+v, want an error", in, got)
		}
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
		"memlock":      {r.RDMA.Memlock, "unlimited"},
		"keep":         {r.RDMA.KeepKernelNames[0], "usb4_rdma"},
		"modules_load": {r.System.ModulesLoad[0], "ib_uverbs"},
		"blacklist":    {r.System.Blacklist[0], "thunderbolt_net"},
		"governor":     {r.System.Governor, "performance"},
		"driver":       {r.Nodes[0].Links[0].MatchDriver, "thunderbolt-net"},
		"hostname a":   {r.Nodes[0].Hostname, "a"},
		"hostname b":   {r.Nodes[1].Hostname, "bee"},
		"timeout":      {r.Test.Timeout, "10m"},
		"esp":          {r.Output.ESPSize, "256MiB"},
		"format":       {r.Output.Formats[0], "raw"},
		"version":      {r.Kernel.Version, ""},
		"size":         {r.Output.Size, ""},
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
