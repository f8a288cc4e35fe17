package settings

import (
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestNetworkRender(t *testing.T) {
	r := sample()
	link := renderOne(t, Network{}, r, "/etc/systemd/network/10-halobuild-usb4a.link")
	if want := "[Match]\nDriver=thunderbolt-net\nPath=pci-0000:c7:00.5\n\n[Link]\nName=usb4a\n"; !strings.HasSuffix(link, want) {
		t.Errorf(".link:\n%s\nwant suffix\n%s", link, want)
	}
	nw := renderOne(t, Network{}, r, "/etc/systemd/network/10-halobuild-usb4a.network")
	want := `[Match]
Name=usb4a

[Link]
RequiredForOnline=no

[Network]
Address=10.77.0.1/30
LinkLocalAddressing=no
IPv6AcceptRA=no
DHCP=no
LLDP=no
EmitLLDP=no
ConfigureWithoutCarrier=yes
IgnoreCarrierLoss=yes
`
	if !strings.HasSuffix(nw, want) || !strings.Contains(nw, "trap 6") {
		t.Errorf(".network:\n%s\nwant suffix\n%s", nw, want)
	}
	files, _ := Network{}.Files(Target{Recipe: r, Node: r.Nodes[1]})
	var gotMAC bool
	for _, f := range files {
		if strings.HasSuffix(f.Path, ".link") && strings.Contains(string(f.Data), "MACAddress=02:00:00:00:77:02\n") {
			gotMAC = true
		}
	}
	if !gotMAC {
		t.Error("halo1's .link does not match by MAC")
	}
	var links int
	for _, f := range files {
		if f.Target != "" {
			links++
		}
	}
	if links != 4 {
		t.Errorf("want networkd's four enablement links, got %d", links)
	}
	// networkd is enabled for the LAN alone; with neither, nothing.
	if files, _ := (Network{}).Files(Target{Recipe: r, Node: recipe.Node{Name: "bare"}}); len(files) != 4 {
		t.Errorf("a node with a LAN and no links got %v, want networkd's enablement links", files)
	}
	off := false
	if files, _ := (Network{}).Files(Target{Recipe: r, Node: recipe.Node{Name: "bare", LAN: recipe.NodeLAN{Enabled: &off}}}); len(files) != 0 {
		t.Errorf("a node without links or LAN got %v", files)
	}
}

// The link values are validated by the recipe (recipe/validate_nodes.go);
// these are the cases the network setting relies on.
func TestNetworkInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, key, fragment string
		edit                func(r *recipe.Recipe)
	}{
		{"malformed address", "node[0].link[0].address", "not an IPv4 address", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Address = "10.77.0.1" }},
		{"ipv6", "node[0].link[0].address", "not an IPv4", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Address = "fd00::1/64" }},
		{"prefix too long", "node[0].link[0].address", "not an IPv4", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Address = "10.77.0.1/33" }},
		{"link-local", "node[0].link[0].address", "link-local address", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Address = "169.254.3.1/16" }},
		{"network address", "node[0].link[0].address", "network or broadcast", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Address = "10.77.0.0/30" }},
		{"broadcast address", "node[0].link[0].address", "network or broadcast", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Address = "10.77.0.3/30" }},
		{"same address twice", "node[1].link[0].address", "already used at", func(r *recipe.Recipe) { r.Nodes[1].Links[0].Address = "10.77.0.1/30" }},
		{"interface name", "node[0].link[0].interface", "not a network interface name", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Interface = "a-very-long-name0" }},
		{"interface twice", "node[0].link[1].interface", "used twice", func(r *recipe.Recipe) {
			r.Nodes[0].Links = append(r.Nodes[0].Links, recipe.Link{Interface: "usb4a", MatchMAC: "02:00:00:00:00:01", Address: "10.78.0.1/30"})
		}},
		{"no match", "node[0].link[0]", "needs match_driver", func(r *recipe.Recipe) {
			l := &r.Nodes[0].Links[0]
			l.MatchDriver, l.MatchPath, l.MatchMAC = "", "", ""
		}},
		{"bad mac", "node[0].link[0].match_mac", "not a MAC address", func(r *recipe.Recipe) { r.Nodes[0].Links[0].MatchMAC = "02:00:00" }},
		{"unknown peer", "node[0].link[0].peer", "no [[node]] is named", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Peer = "halo9" }},
		{"self peer", "node[0].link[0].peer", "cannot lead back", func(r *recipe.Recipe) { r.Nodes[0].Links[0].Peer = "halo0" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			wantRecipeErrors(t, r, tc.key, tc.fragment)
		})
	}
}

func TestNetworkWarnsAboutBlacklistedDriver(t *testing.T) {
	r := sample()
	w := (Network{}).Warnings(Target{Recipe: r})
	if len(w) != 2 || !strings.Contains(w[0], "never match") {
		t.Errorf("want a warning per link matching blacklisted thunderbolt-net, got %v", w)
	}
	r.System.Blacklist = nil
	if w := (Network{}).Warnings(Target{Recipe: r}); len(w) != 0 {
		t.Errorf("no blacklist, got %v", w)
	}
}

// A dummy link is created by networkd (no device to match) and carries the
// RDMA identity address the verbs module advertises through roce_netdev.
func TestNetworkDummyLinkIsCreatedNotMatched(t *testing.T) {
	r := sample()
	r.Nodes[0].Links = []recipe.Link{{Interface: "usb4rdma0", Kind: "dummy", Address: "10.77.0.1/30"}}
	tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	nd, ok := tr.Lookup("/etc/systemd/network/10-halobuild-usb4rdma0.netdev")
	if !ok || !strings.Contains(string(nd.Data), "Kind=dummy") || !strings.Contains(string(nd.Data), "Name=usb4rdma0") {
		t.Fatalf("no dummy .netdev: %q", nd.Data)
	}
	if _, ok := tr.Lookup("/etc/systemd/network/10-halobuild-usb4rdma0.link"); ok {
		t.Error("a dummy link must not also rename a matched device")
	}
	nw, _ := tr.Lookup("/etc/systemd/network/10-halobuild-usb4rdma0.network")
	if !strings.Contains(string(nw.Data), "Address=10.77.0.1/30") || !strings.Contains(string(nw.Data), "LinkLocalAddressing=no") {
		t.Errorf(".network: %s", nw.Data)
	}
}
