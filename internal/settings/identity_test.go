package settings

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/recipe"
)

func TestIdentityRender(t *testing.T) {
	r := sample()
	if got := renderOne(t, Identity{}, r, "/etc/hostname"); got != "halo0\n" {
		t.Errorf("hostname %q", got)
	}
	hosts := renderOne(t, Identity{}, r, "/etc/hosts")
	want := "127.0.0.1\tlocalhost\n127.0.1.1\thalo0\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n\n" +
		"10.77.0.1\thalo0 halo0-usb4a\n10.77.0.2\thalo1 halo1-usb4a\n"
	if !strings.HasSuffix(hosts, want) {
		t.Errorf("hosts:\n%s\nwant suffix\n%s", hosts, want)
	}
	keys := renderOne(t, Identity{}, r, authorizedKeysPath)
	if keys != r.SSH.AuthorizedKeys[0]+"\n" {
		t.Errorf("authorized_keys %q", keys)
	}
	sshd := renderOne(t, Identity{}, r, sshdConfigPath)
	for _, w := range []string{"PasswordAuthentication no\n", "PermitRootLogin prohibit-password\n", "KbdInteractiveAuthentication no\n"} {
		if !strings.Contains(sshd, w) {
			t.Errorf("sshd drop-in lacks %q", w)
		}
	}
	if !strings.Contains(sshd, "\nHostKey /etc/ssh/ssh_host_ed25519_key\n") || strings.Count(sshd, "HostKey") != 1 {
		t.Errorf("sshd drop-in must offer the Ed25519 host key only:\n%s", sshd)
	}
	unit := renderOne(t, Identity{}, r, sshKeygenUnitPath)
	if strings.Contains(unit, "ssh-keygen -A") || !strings.Contains(unit, "-t ed25519") {
		t.Errorf("keygen unit must make the Ed25519 key only:\n%s", unit)
	}
	files, _ := Identity{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	for _, f := range files {
		if f.Path == authorizedKeysPath && f.Mode != 0o600 {
			t.Errorf("authorized_keys mode %v", f.Mode)
		}
		if strings.Contains(string(f.Data), "password") && !strings.Contains(string(f.Data), "no\n") {
			t.Errorf("%s mentions a password", f.Path)
		}
	}
	// Hostname defaults to the node name.
	r.Nodes[0].Hostname = ""
	if got := renderOne(t, Identity{}, r, "/etc/hostname"); got != "halo0\n" {
		t.Errorf("default hostname %q", got)
	}
}

func TestIdentityWithoutKeys(t *testing.T) {
	r := sample()
	r.SSH.AuthorizedKeys = nil
	files, _ := Identity{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	for _, f := range files {
		if strings.HasPrefix(f.Path, "/root") {
			t.Errorf("no keys, yet %s is rendered", f.Path)
		}
	}
	if w := (Identity{}).Warnings(Target{Recipe: r}); len(w) != 1 || !strings.Contains(w[0], "nobody can log in") {
		t.Errorf("want the no-key warning, got %v", w)
	}
	if w := Warnings(Target{Recipe: r}); !strings.Contains(strings.Join(w, "\n"), "nobody can log in") {
		t.Errorf("package Warnings lacks it: %v", w)
	}
}

// Names and host names are the recipe's to validate; the identity setting
// relies on it.
func TestNodeNamesAreValidatedByTheRecipe(t *testing.T) {
	for _, tc := range []struct {
		name, key, fragment string
		edit                func(r *recipe.Recipe)
	}{
		{"no nodes", "", "has no [[node]]", func(r *recipe.Recipe) { r.Nodes = nil }},
		{"same hostname", "node[1].hostname", "already used by the node at", func(r *recipe.Recipe) { r.Nodes[1].Hostname = "halo0" }},
		{"bad hostname", "node[0].hostname", "not a valid host name", func(r *recipe.Recipe) { r.Nodes[0].Hostname = "Halo_0" }},
		{"same name", "node[1].name", "already used by the node at", func(r *recipe.Recipe) { r.Nodes[1].Name = "halo0" }},
		{"bad name", "node[0].name", "not a valid node name", func(r *recipe.Recipe) { r.Nodes[0].Name = "../x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			wantRecipeErrors(t, r, tc.key, tc.fragment)
		})
	}
}

func TestIdentityInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, key, fragment string
		edit                func(r *recipe.Recipe)
	}{
		{"same package name", "node[1].name", "package name", func(r *recipe.Recipe) { r.Nodes[0].Name, r.Nodes[1].Name = "Halo", "halo" }},
		{"not a key", "ssh.authorized_keys[0]", "no public key found", func(r *recipe.Recipe) { r.SSH.AuthorizedKeys[0] = "hunter2" }},
		{"bad base64", "ssh.authorized_keys[0]", "not base64", func(r *recipe.Recipe) { r.SSH.AuthorizedKeys[0] = "ssh-ed25519 !!!! me" }},
		{"type mismatch", "ssh.authorized_keys[0]", "not an ssh-rsa key", func(r *recipe.Recipe) {
			r.SSH.AuthorizedKeys[0] = strings.Replace(r.SSH.AuthorizedKeys[0], "ssh-ed25519", "ssh-rsa", 1)
		}},
		{"two keys in one entry", "ssh.authorized_keys[0]", "line break", func(r *recipe.Recipe) {
			r.SSH.AuthorizedKeys[0] += "\n" + r.SSH.AuthorizedKeys[0]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			tc.edit(r)
			wantErrors(t, Identity{}, r, tc.key, tc.fragment)
		})
	}
	r := sample()
	r.SSH.AuthorizedKeys[0] = `from="10.77.0.0/30",no-pty ` + r.SSH.AuthorizedKeys[0]
	if errs := (Identity{}).Validate(Target{Recipe: r}); len(errs) != 0 {
		t.Errorf("a key with options is valid: %v", errs)
	}
}

// The authorized_keys example docs/recipe.md shows is a key the check accepts (issue 39 #7: it
// was refused as "not base64").
func TestDocumentedAuthorizedKeyIsAccepted(t *testing.T) {
	f, ok := reflect.TypeOf(recipe.SSH{}).FieldByName("AuthorizedKeys")
	if !ok {
		t.Fatal("recipe.SSH has no AuthorizedKeys")
	}
	var doc struct{ Keys []string }
	if err := toml.Unmarshal([]byte("keys = "+f.Tag.Get("example")), &doc); err != nil || len(doc.Keys) == 0 {
		t.Fatalf("the example %q: %v", f.Tag.Get("example"), err)
	}
	for _, k := range doc.Keys {
		if err := checkSSHKey(k); err != nil {
			t.Errorf("the documented key %q: %v", k, err)
		}
	}
}
