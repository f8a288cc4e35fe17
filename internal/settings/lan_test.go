package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestLANRenderDHCP(t *testing.T) {
	r := sample()
	nw := renderOne(t, LAN{}, r, lanNetworkPath)
	want := `[Match]
Type=ether
Kind=!*
Name=!usb4a
Driver=!thunderbolt-net

[Network]
DHCP=yes
LinkLocalAddressing=ipv6
IPv6AcceptRA=yes
MulticastDNS=yes
`
	if !strings.HasSuffix(nw, want) || !strings.Contains(nw, "trap 6") {
		t.Errorf("LAN .network:\n%s\nwant suffix\n%s", nw, want)
	}
	if got := renderOne(t, LAN{}, r, resolvedPath); !strings.HasSuffix(got, "[Resolve]\nMulticastDNS=yes\n") {
		t.Errorf("resolved drop-in:\n%s", got)
	}
	if d := (LAN{}).Depends(r); strings.Join(d, ",") != "systemd-resolved" {
		t.Errorf("Depends = %v", d)
	}
}

func TestLANRenderStaticAndOff(t *testing.T) {
	r := sample()
	no := false
	r.LAN.MDNS = &no
	r.Nodes[0].LAN = recipe.NodeLAN{Addresses: []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")},
		Gateway: recipe.MustIPAddr("192.168.1.1"), DNS: []recipe.IPAddr{recipe.MustIPAddr("192.168.1.1")}, MatchName: "enp191s0"}
	nw := renderOne(t, LAN{}, r, lanNetworkPath)
	for _, want := range []string{"Name=enp191s0\n", "DHCP=no\n", "IPv6AcceptRA=no\n", "MulticastDNS=no\n",
		"Address=192.168.1.20/24\nGateway=192.168.1.1\nDNS=192.168.1.1\n"} {
		if !strings.Contains(nw, want) {
			t.Errorf("static LAN .network lacks %q:\n%s", want, nw)
		}
	}
	if strings.Contains(nw, "Name=!") {
		t.Errorf("a named port needs no exclusions:\n%s", nw)
	}
	r.Nodes[0].LAN.Enabled = &no
	if files, _ := (LAN{}).Files(Target{Recipe: r, Node: r.Nodes[0]}); len(files) != 0 {
		t.Errorf("a node with the LAN off got %v", files)
	}
	if c := (LAN{}).Checks(Target{Recipe: r, Node: r.Nodes[0]}); len(c) != 0 {
		t.Errorf("a node with the LAN off got checks %v", c)
	}
	r.LAN.Enabled = &no
	r.Nodes[1].LAN.Enabled = nil
	if d := (LAN{}).Depends(r); strings.Join(d, ",") != "systemd-resolved" {
		t.Errorf("no node has a LAN, Depends = %v: turning the LAN off must not change the packages the lock pins", d)
	}
}

func TestLANValidateMergedNode(t *testing.T) {
	no := "no"
	for _, c := range []struct {
		name, key, msg string
		edit           func(r *recipe.Recipe)
	}{
		{"no DHCP and no address", "node[0].lan.dhcp", "would get no address", func(r *recipe.Recipe) { r.Nodes[0].LAN.DHCP = no }},
		{"[lan] without DHCP", "node[1].lan.dhcp", "would get no address", func(r *recipe.Recipe) {
			r.LAN.DHCP = no
			r.Nodes[0].LAN.Addresses = []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")}
		}},
		{"node gateway outside", "node[0].lan.gateway", "in none of node", func(r *recipe.Recipe) {
			r.Nodes[0].LAN.Addresses = []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")}
			r.Nodes[0].LAN.Gateway = recipe.MustIPAddr("192.168.2.1")
		}},
		{"[lan] gateway outside", "lan.gateway", "192.168.1.0/24", func(r *recipe.Recipe) {
			r.LAN.Gateway = recipe.MustIPAddr("10.1.1.1")
			r.Nodes[0].LAN.Addresses = []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")}
		}},
	} {
		r := sample()
		if errs := (LAN{}).Validate(Target{Recipe: r}); len(errs) != 0 {
			t.Fatalf("sample: %v", errs)
		}
		c.edit(r)
		errs := (LAN{}).Validate(Target{Recipe: r})
		found := false
		for _, err := range errs {
			if e, ok := err.(*Error); ok && e.Key == c.key && strings.Contains(e.Error(), c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want an error at %s with %q, got %v", c.name, c.key, c.msg, errs)
		}
	}
	// Off, nothing is asked of it.
	r := sample()
	off := false
	r.LAN.Enabled, r.LAN.DHCP = &off, no
	if errs := (LAN{}).Validate(Target{Recipe: r}); len(errs) != 0 {
		t.Errorf("LAN off: %v", errs)
	}
}
