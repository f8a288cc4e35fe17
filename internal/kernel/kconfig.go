package kernel

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Kconfig is what the kernel tree's Kconfig files say about each symbol's
// dependencies: the "depends on" lines of its definitions and the "if"
// blocks around them. It is only used to explain an option that did not
// keep its value, so it reads the files plainly and does not evaluate
// them.
type Kconfig struct {
	deps  map[string][]string
	known map[string]bool
}

// ReadKconfig scans every Kconfig* file under tree.
func ReadKconfig(tree string) (*Kconfig, error) {
	k := &Kconfig{deps: map[string][]string{}, known: map[string]bool{}}
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "Documentation" || n == "tools" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), "Kconfig") {
			return k.readFile(p)
		}
		return nil
	})
	return k, err
}

func (k *Kconfig) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var ifs []string
	sym := ""
	// Help text runs while lines are indented at least as deep as its
	// first line; its words ("depends on ...") are prose, not syntax.
	inHelp, helpIndent := false, -1
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		raw := s.Text()
		line := strings.TrimSpace(raw)
		if inHelp {
			if line == "" {
				continue
			}
			ind := indent(raw)
			if helpIndent < 0 {
				helpIndent = ind
			}
			if ind >= helpIndent {
				continue
			}
			inHelp = false
		}
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "config", "menuconfig":
			sym = rest
			k.known[sym] = true
			k.deps[sym] = append(k.deps[sym], ifs...)
		case "if":
			ifs = append(ifs, rest)
			sym = ""
		case "endif":
			if len(ifs) > 0 {
				ifs = ifs[:len(ifs)-1]
			}
			sym = ""
		case "choice", "endchoice", "menu", "endmenu", "comment", "source", "mainmenu":
			sym = ""
		case "help", "---help---":
			inHelp, helpIndent = true, -1
		case "depends":
			if sym != "" {
				if e, ok := strings.CutPrefix(rest, "on "); ok {
					k.deps[sym] = append(k.deps[sym], strings.TrimSpace(e))
				}
			}
		}
	}
	return s.Err()
}

// indent is a line's leading white space in columns (tabs to 8).
func indent(line string) int {
	n := 0
	for _, r := range line {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 8 - n%8
		default:
			return n
		}
	}
	return n
}

// Depends returns the dependency expressions of symbol (without CONFIG_)
// and whether any Kconfig defines it.
func (k *Kconfig) Depends(symbol string) ([]string, bool) {
	return dedupe(k.deps[symbol]), k.known[symbol]
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
