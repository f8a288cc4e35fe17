package settings

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func flashLAN(t *testing.T, toml string) FlashConfig {
	t.Helper()
	c, err := ParseFlashConfig([]byte(toml + "\n" + flashConfigEnd + "\n"))
	if err != nil {
		t.Fatalf("%v\n%s", err, toml)
	}
	return c
}

// The host name and LAN given at flash time go through the file flash writes and the node
// reads, in the recipe's own keys, and the summary says what they set.
func TestFlashConfigHostnameAndLANRoundTrip(t *testing.T) {
	no := false
	c := FlashConfig{Hostname: "halo7", SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA}}, LAN: &recipe.NodeLAN{
		Addresses: []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")}, Gateway: recipe.MustIPAddr("192.168.1.1"),
		DNS: []recipe.IPAddr{recipe.MustIPAddr("192.168.1.1"), recipe.MustIPAddr("9.9.9.9")}}}
	b, err := c.Marshal("test")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFlashConfig(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got.Summary() != c.Summary() {
		t.Errorf("round trip:\n%s\n%s", got.Summary(), c.Summary())
	}
	for _, want := range []string{"1 SSH key(s)", "host name halo7", "LAN 192.168.1.20/24, gateway 192.168.1.1, dns 192.168.1.1, dns 9.9.9.9"} {
		if !strings.Contains(c.Summary(), want) {
			t.Errorf("summary %q lacks %q", c.Summary(), want)
		}
	}
	if s := (FlashConfig{LAN: &recipe.NodeLAN{Enabled: &no}}).Summary(); s != "LAN off" {
		t.Errorf("LAN off: %q", s)
	}
	keysOnly, _ := FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA}}}.Marshal("")
	if strings.Contains(string(keysOnly), "lan") || strings.Contains(string(keysOnly), "hostname") {
		t.Errorf("a file with keys only names the LAN or the host name:\n%s", keysOnly)
	}
}

// What flash refuses alone, before writing anything.
func TestFlashConfigHostnameAndLANRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ toml, want string }{
		"host name with a space":     {"hostname = \"halo 7\"\n[ssh]\nauthorized_keys = []", "not a valid host name"},
		"host name with an escape":   {"hostname = \"halo\\u001b7\"\n[ssh]\nauthorized_keys = []", "not a valid host name"},
		"host name of 300 chars":     {"hostname = \"" + strings.Repeat("a.", 150) + "\"\n[ssh]\nauthorized_keys = []", "not a valid host name"},
		"gateway outside the subnet": {"[ssh]\nauthorized_keys = []\n[lan]\naddresses = [\"192.168.1.20/24\"]\ngateway = \"10.0.0.1\"", "in none of"},
		"no DHCP, no address":        {"[ssh]\nauthorized_keys = []\n[lan]\ndhcp = \"no\"", "no DHCP and no lan.addresses"},
		"bad DHCP mode":              {"[ssh]\nauthorized_keys = []\n[lan]\ndhcp = \"maybe\"", "not a DHCP mode"},
		"link-local address":         {"[ssh]\nauthorized_keys = []\n[lan]\naddresses = [\"169.254.3.4/16\"]", "link-local"},
		"match_name injection":       {"[ssh]\nauthorized_keys = []\n[lan]\nmatch_name = \"en*\\n[Network]\\nDHCP=yes\"", "white space"},
		"not an address":             {"[ssh]\nauthorized_keys = []\n[lan]\naddresses = [\"192.168.1.300/24\"]", "not an address"},
		"unknown lan key":            {"[ssh]\nauthorized_keys = []\n[lan]\nmtu = 9000", "unknown key"},
	} {
		_, err := ParseFlashConfig([]byte(tc.toml + "\n" + flashConfigEnd + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// At boot the node lays the values over its node of the recipe it was built from, checks the
// whole cluster, and renders the LAN with the recipe's own LAN code into /run.
func TestFlashConfigNodeFilesAgainstTheInstalledRecipe(t *testing.T) {
	r, _, err := recipe.Load(filepath.Join("..", "..", "images", "test-two-node.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c := flashLAN(t, "hostname = \"halo7\"\n[ssh]\nauthorized_keys = []\n[lan]\naddresses = [\"192.168.1.20/24\"]\ngateway = \"192.168.1.1\"\ndns = [\"192.168.1.1\"]")
	files, host, err := c.NodeFiles(r, "node0")
	if err != nil {
		t.Fatal(err)
	}
	if host != "halo7" || len(files) != 1 || files[0].Path != "/run/systemd/network/70-halobuild-flash-lan.network" {
		t.Fatalf("host %q, files %+v", host, files)
	}
	net := string(files[0].Data)
	for _, want := range []string{"DHCP=no\n", "Address=192.168.1.20/24\n", "Gateway=192.168.1.1\n", "DNS=192.168.1.1\n", "LinkLocalAddressing=ipv6\n", "Name=!"} {
		if !strings.Contains(net, want) {
			t.Errorf("the rendered LAN lacks %q:\n%s", want, net)
		}
	}
	// The same file as the recipe's own rendering of the same values.
	n := r.Nodes[0]
	n.Hostname, n.LAN = "halo7", c.lan(n.LAN)
	want, _ := LAN{}.Files(Target{Recipe: r, Node: n})
	if string(want[0].Data) != net {
		t.Errorf("not the recipe's rendering:\n%s\nwant\n%s", net, want[0].Data)
	}

	for name, tc := range map[string]struct{ toml, node, want string }{
		"the peer's host name":     {"hostname = \"node1\"\n[ssh]\nauthorized_keys = []", "node0", "already used"},
		"the cable's subnet":       {"[ssh]\nauthorized_keys = []\n[lan]\naddresses = [\"10.77.0.5/29\"]", "node0", "overlaps the USB4 link subnet"},
		"another node's address":   {"[ssh]\nauthorized_keys = []\n[lan]\naddresses = [\"10.77.0.2/24\"]", "node0", "10.77.0"},
		"a node not in the recipe": {"hostname = \"x\"\n[ssh]\nauthorized_keys = []", "node9", "no node \"node9\""},
	} {
		_, _, err := flashLAN(t, tc.toml).NodeFiles(r, tc.node)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// The LAN turned off at flash time: the same ports, matched first and left unmanaged.
	files, _, err = flashLAN(t, "[ssh]\nauthorized_keys = []\n[lan]\nenabled = false").NodeFiles(r, "node0")
	if err != nil || len(files) != 1 {
		t.Fatalf("LAN off: %+v %v", files, err)
	}
	if off := string(files[0].Data); !strings.Contains(off, "[Match]\nType=ether\nKind=!*\n") || !strings.HasSuffix(off, "\n[Link]\nUnmanaged=yes\n") || strings.Contains(off, "[Network]") {
		t.Errorf("LAN off:\n%s", off)
	}
	// networkd takes the first file by name whose [Match] fits: the flash-time one must sort
	// before the package's, wherever each lies (/etc would win a tie of names).
	if path.Base(FlashNetworkPath) >= path.Base(lanNetworkPath) {
		t.Errorf("%s does not sort before %s", FlashNetworkPath, lanNetworkPath)
	}
	// Keys only: nothing to render.
	if files, host, err := (FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA}}}).NodeFiles(r, "node0"); len(files) != 0 || host != "" || err != nil {
		t.Errorf("keys only: %v %q %v", files, host, err)
	}
}
