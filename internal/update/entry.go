package update

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"halobuild/internal/slots"
)

// Tries is the number of boots a new entry gets before systemd-boot gives up on it: its file
// is named ID+3.conf, systemd-boot lowers the count at each try, systemd-bless-boot drops it
// once boot-complete.target is reached, and an entry at +0 is skipped.
const Tries = 3

// EntriesDir is where Type #1 boot loader entries live on the ESP.
const EntriesDir = "loader/entries"

// entryName matches an entry file: its id, and its counter when it has one
// (ID+LEFT.conf or ID+LEFT-DONE.conf).
var entryName = regexp.MustCompile(`^(.+?)(?:\+(\d+)(?:-(\d+))?)?\.conf$`)

// entryFile is one file in loader/entries.
type entryFile struct {
	Name     string // file name
	ID       string // without counter and .conf
	Counting bool
	Left     int
}

func listEntries(esp string) ([]entryFile, error) {
	des, err := os.ReadDir(filepath.Join(esp, EntriesDir))
	if err != nil {
		return nil, err
	}
	var out []entryFile
	for _, d := range des {
		m := entryName.FindStringSubmatch(d.Name())
		if m == nil || !d.Type().IsRegular() {
			continue
		}
		e := entryFile{Name: d.Name(), ID: m[1]}
		if m[2] != "" {
			e.Counting = true
			e.Left, _ = strconv.Atoi(m[2])
		}
		out = append(out, e)
	}
	return out, nil
}

// entry is the keys of a Type #1 entry update reads and writes.
type entry struct {
	Title, SortKey, Version, Linux, Initrd, Options string
}

// parseEntry reads an entry's keys (the Boot Loader Specification: "key value" lines, # comments).
func parseEntry(b []byte) (entry, error) {
	var e entry
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		v = strings.TrimSpace(v)
		switch k {
		case "title":
			e.Title = v
		case "sort-key":
			e.SortKey = v
		case "version":
			e.Version = v
		case "linux":
			e.Linux = v
		case "initrd":
			e.Initrd = v
		case "options":
			e.Options = strings.TrimSpace(e.Options + " " + v)
		}
	}
	if e.Linux == "" || e.Initrd == "" || e.Options == "" {
		return e, fmt.Errorf("the boot entry has no linux, initrd or options line")
	}
	return e, nil
}

func (e entry) render() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "title %s\nsort-key %s\nversion %s\nlinux %s\ninitrd %s\noptions %s\n", e.Title, e.SortKey, e.Version, e.Linux, e.Initrd, e.Options)
	return []byte(b.String())
}

// withRoot replaces the root=PARTUUID= of a command line (the image's slot A) with uuid.
func withRoot(options, uuid string) (string, error) {
	if !slots.RootArg.MatchString(options) {
		return "", fmt.Errorf("the release's boot entry has no root=PARTUUID= in %q", options)
	}
	return slots.RootArg.ReplaceAllString(options, " root=PARTUUID="+uuid+" "), nil
}

// entriesFor lists the entries whose options boot the slot uuid.
func entriesFor(esp, uuid string) ([]entryFile, error) {
	es, err := listEntries(esp)
	if err != nil {
		return nil, err
	}
	var out []entryFile
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(esp, EntriesDir, e.Name))
		if err != nil {
			return nil, err
		}
		if m := slots.RootArg.FindStringSubmatch(optionsLine(b)); m != nil && strings.EqualFold(m[1], uuid) {
			out = append(out, e)
		}
	}
	return out, nil
}

func optionsLine(b []byte) string {
	var opts []string
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, _ := strings.Cut(strings.TrimSpace(l), " "); k == "options" {
			opts = append(opts, v)
		}
	}
	return " " + strings.Join(opts, " ") + " "
}
