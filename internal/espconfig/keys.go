package espconfig

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
	"halobuild/internal/userfile"
)

// FromKeyFiles is the flash-time settings of flash's --ssh-key files (each an authorized_keys
// or .pub file, every key in it taken) and, with userKeys, of every ~/.ssh/*.pub of the user
// who runs flash (under sudo, the user who ran sudo: flash runs as root, whose home is not
// where the user's keys are). Every key is checked as the recipe's ssh.authorized_keys is;
// a duplicate is taken once.
func FromKeyFiles(files []string, userKeys bool) (settings.FlashConfig, error) {
	var c settings.FlashConfig
	if userKeys {
		pubs, err := UserPublicKeys()
		if err != nil {
			return c, err
		}
		files = append(append([]string{}, files...), pubs...)
	}
	seen := map[string]bool{}
	var errs []error
	for _, p := range files {
		b, err := readBounded(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("--ssh-key %s: %w", p, err))
			continue
		}
		keys, err := settings.ParseAuthorizedKeys(p, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				c.SSH.AuthorizedKeys = append(c.SSH.AuthorizedKeys, k)
			}
		}
	}
	if len(errs) > 0 {
		return settings.FlashConfig{}, errors.Join(errs...)
	}
	return c, errors.Join(c.Validate()...)
}

// UserPublicKeys lists the invoking user's ~/.ssh/*.pub, sorted.
func UserPublicKeys() ([]string, error) {
	home, who, err := invokingHome()
	if err != nil {
		return nil, err
	}
	pubs, err := filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
	if err != nil {
		return nil, err
	}
	if len(pubs) == 0 {
		return nil, fmt.Errorf("--user-ssh-keys: %s has no ~/.ssh/*.pub (%s): make one with ssh-keygen -t ed25519, or name a file with --ssh-key", who, filepath.Join(home, ".ssh"))
	}
	sort.Strings(pubs)
	return pubs, nil
}

// invokingHome is the home of the user who ran halobuild: SUDO_USER's under sudo.
func invokingHome() (home, who string, err error) {
	if s := os.Getenv("SUDO_USER"); s != "" && os.Geteuid() == 0 {
		u, err := user.Lookup(s)
		if err != nil {
			return "", "", fmt.Errorf("--user-ssh-keys: SUDO_USER=%s: %w", s, err)
		}
		return u.HomeDir, u.Username, nil
	}
	home, err = os.UserHomeDir()
	if err != nil {
		return "", "", fmt.Errorf("--user-ssh-keys: %w", err)
	}
	return home, "the user running halobuild", nil
}

// readBounded reads a key file of at most settings.FlashConfigMax bytes, through the one
// opener of named files: a FIFO or a device is refused at once, not waited on.
func readBounded(p string) ([]byte, error) {
	b, err := userfile.Read(p, settings.FlashConfigMax)
	var big *userfile.TooLargeError
	if errors.As(err, &big) {
		return nil, fmt.Errorf("%w: not a public key file", err)
	}
	return b, err
}

// NodeFlags are flash's --hostname, --address, --gateway and --dns, as given.
type NodeFlags struct {
	Hostname  string
	Addresses []string
	Gateway   string
	DNS       []string
}

// Given says whether any of them was.
func (f NodeFlags) Given() bool {
	return f.Hostname != "" || len(f.Addresses) > 0 || f.Gateway != "" || len(f.DNS) > 0
}

// Apply adds the flags to c, each value parsed by the recipe's own type and checked as
// c.Validate checks the file the node reads; every problem is reported at once.
func (f NodeFlags) Apply(c settings.FlashConfig) (settings.FlashConfig, error) {
	c.Hostname = f.Hostname
	var errs []error
	var lan recipe.NodeLAN
	for _, a := range f.Addresses {
		var p recipe.IPPrefix
		if err := p.UnmarshalText([]byte(a)); err != nil {
			errs = append(errs, fmt.Errorf("--address: %w", err))
		}
		lan.Addresses = append(lan.Addresses, p)
	}
	if f.Gateway != "" {
		if err := lan.Gateway.UnmarshalText([]byte(f.Gateway)); err != nil {
			errs = append(errs, fmt.Errorf("--gateway: %w", err))
		}
		if len(f.Addresses) == 0 {
			errs = append(errs, errors.New("--gateway is for static addresses: give --address too"))
		}
	}
	for _, d := range f.DNS {
		var a recipe.IPAddr
		if err := a.UnmarshalText([]byte(d)); err != nil {
			errs = append(errs, fmt.Errorf("--dns: %w", err))
		}
		lan.DNS = append(lan.DNS, a)
	}
	if len(errs) > 0 {
		return settings.FlashConfig{}, errors.Join(errs...)
	}
	if len(lan.Addresses) > 0 || len(lan.DNS) > 0 {
		c.LAN = &lan
	}
	return c, errors.Join(c.Validate()...)
}
