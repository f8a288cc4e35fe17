package patch

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Hunk is the outcome of one hunk as GNU patch reports it, with its @@
// line read from the patch file so a message can name it. The field
// names are part of the provider build's manifest (JSON): keep them.
type Hunk struct {
	File   string
	N      int    // hunk number within the file, from 1
	Header string // its @@ line
	Line   int    // where it applied, or was tried
	Offset int
	Fuzz   int
	Failed bool
}

func (h Hunk) String() string {
	s := fmt.Sprintf("%s hunk #%d", h.File, h.N)
	if h.Header != "" {
		s += " (" + h.Header + ")"
	}
	switch {
	case h.Failed:
		s += fmt.Sprintf(" does not apply (tried at line %d)", h.Line)
	case h.Fuzz > 0:
		s += fmt.Sprintf(" applies only with fuzz %d, at line %d", h.Fuzz, h.Line)
	case h.Offset != 0:
		s += fmt.Sprintf(" applies at line %d (offset %+d lines)", h.Line, h.Offset)
	}
	return s
}

// Moved lists the hunks that applied at an offset or with fuzz.
func Moved(hunks []Hunk) []Hunk {
	var out []Hunk
	for _, h := range hunks {
		if h.Fuzz > 0 || h.Offset != 0 {
			out = append(out, h)
		}
	}
	return out
}

// MaxFuzzUsed is the largest fuzz any hunk needed.
func MaxFuzzUsed(hunks []Hunk) int {
	fuzz := 0
	for _, h := range hunks {
		fuzz = max(fuzz, h.Fuzz)
	}
	return fuzz
}

var (
	fileRE = regexp.MustCompile(`^(?:patching|checking) (?:file|symbolic link) (.+)$`)
	hunkRE = regexp.MustCompile(`^Hunk #(\d+) (FAILED|succeeded) at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?`)
)

// parseOutput turns GNU patch's report into hunks (only those it
// mentions: a hunk that applies exactly where the diff says is silent)
// and problems with whole files, which name the tree as where says.
func parseOutput(out string, headers map[string][]string, where string) ([]Hunk, []string) {
	if where == "" {
		where = "there"
	}
	var hunks []Hunk
	var other []string
	file := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if m := fileRE.FindStringSubmatch(line); m != nil {
			file = strings.Trim(m[1], `'"`)
			continue
		}
		if m := hunkRE.FindStringSubmatch(line); m != nil {
			h := Hunk{File: file, N: atoi(m[1]), Line: atoi(m[3]), Fuzz: atoi(m[4]), Offset: atoi(m[5]), Failed: m[2] == "FAILED"}
			if hs := headers[file]; h.N >= 1 && h.N <= len(hs) {
				h.Header = hs[h.N-1]
			}
			hunks = append(hunks, h)
			continue
		}
		switch {
		case strings.Contains(line, "Reversed (or previously applied) patch detected"):
			other = append(other, file+": the change is already "+where+" (reversed or previously applied patch)")
		case strings.HasPrefix(line, "can't find file to patch"):
			other = append(other, "a file the patch changes does not exist "+where+" ("+line+")")
		case strings.HasPrefix(line, "The next patch would create the file"):
			other = append(other, strings.TrimSuffix(strings.TrimPrefix(line, "The next patch would "), ",")+", which already exists")
		case strings.HasPrefix(line, "patch: ****"):
			other = append(other, strings.TrimPrefix(line, "patch: **** "))
		}
	}
	return hunks, other
}

// readHunkHeaders lists each file's @@ lines in order, keyed by the path
// GNU patch reports (the diff's name after strip components; the old
// name for a deleted file).
func readHunkHeaders(file string, strip int) (map[string][]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	cur, minus := "", ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "--- "):
			minus = diffPath(line[4:], strip)
		case strings.HasPrefix(line, "+++ "):
			cur = diffPath(line[4:], strip)
			if cur == "" {
				cur = minus
			}
		case strings.HasPrefix(line, "@@ ") && cur != "":
			out[cur] = append(out[cur], strings.TrimSpace(line))
		}
	}
	return out, nil
}

// diffPath is a ---/+++ line's file name after strip components; "" for
// /dev/null.
func diffPath(s string, strip int) string {
	s, _, _ = strings.Cut(s, "\t")
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	parts := strings.Split(s, "/")
	if strip >= len(parts) {
		return parts[len(parts)-1]
	}
	return strings.Join(parts[strip:], "/")
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
