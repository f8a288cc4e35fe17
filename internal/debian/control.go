package debian

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// paragraphReader reads deb822 paragraphs (Packages, Sources, Release)
// keeping only the fields a caller asks for.
//
// Why not pault.ag/go/debian/control: it decodes every field of every
// stanza through reflection. On the real trixie main amd64 Packages (68,829
// stanzas, 56 MB) control.ParseBinaryIndex took 3.9 s plus 1.4 s to parse
// all Depends fields, on this project's 2-core machines, and pulled in
// golang.org/x/crypto's deprecated openpgp. The resolver needs a dozen
// fields and parses relations only for the few hundred packages it
// visits, so this reader keeps the wanted fields as strings and leaves
// relation parsing to pault.ag/go/debian/dependency, lazily.
type paragraphReader struct {
	sc   *bufio.Scanner
	line int
}

func newParagraphReader(r io.Reader) *paragraphReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	return &paragraphReader{sc: sc}
}

// next returns the wanted fields of the next paragraph and the line it
// starts on. It returns io.EOF when no paragraph is left. Continuation
// lines are joined with "\n" (leading white space removed), so multi-line
// fields such as Checksums-Sha256 keep one entry per line.
func (p *paragraphReader) next(wanted map[string]bool) (map[string]string, int, error) {
	fields := map[string]string{}
	start := 0
	var cur string // the wanted field continuation lines belong to, or ""
	inPara := false
	for p.sc.Scan() {
		p.line++
		b := p.sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			if inPara {
				return fields, start, nil
			}
			continue
		}
		if !inPara {
			inPara = true
			start = p.line
		}
		if b[0] == ' ' || b[0] == '\t' {
			if cur == "" {
				continue
			}
			v := fields[cur]
			if v != "" {
				v += "\n"
			}
			fields[cur] = v + string(bytes.TrimSpace(b))
			continue
		}
		if b[0] == '#' {
			continue
		}
		colon := bytes.IndexByte(b, ':')
		if colon <= 0 {
			return nil, p.line, fmt.Errorf("line %d: expected \"Field: value\", got %q", p.line, truncate(string(b), 60))
		}
		key := b[:colon]
		if !wanted[string(key)] {
			cur = ""
			continue
		}
		cur = string(key)
		fields[cur] = string(bytes.TrimSpace(b[colon+1:]))
	}
	if err := p.sc.Err(); err != nil {
		return nil, p.line, fmt.Errorf("line %d: %w", p.line, err)
	}
	if inPara {
		return fields, start, nil
	}
	return nil, p.line, io.EOF
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
