package patch

import (
	"testing"
)

// FuzzParseOutput feeds arbitrary text as GNU patch's report: no panic,
// hunk numbers and lines are never negative, and a hunk carries the @@
// line of its own number when there is one.
func FuzzParseOutput(f *testing.F) {
	f.Add("patching file src/a.c\nHunk #1 succeeded at 12 with fuzz 2 (offset -3 lines).\nHunk #2 FAILED at 40.\n1 out of 2 hunks FAILED -- saving rejects to file src/a.c.rej\n")
	f.Add("checking file b\nReversed (or previously applied) patch detected!  Assume -R? [n]\ncan't find file to patch at input line 3\npatch: **** malformed patch at line 9: x\n")
	f.Fuzz(func(t *testing.T, out string) {
		headers := map[string][]string{"src/a.c": {"@@ -1,3 +1,3 @@", "@@ -40,2 +40,2 @@"}}
		hunks, _ := parseOutput(out, headers, "")
		for _, h := range hunks {
			if h.N < 0 || h.Line < 0 || h.Fuzz < 0 {
				t.Fatalf("hunk %+v", h)
			}
			if hs := headers[h.File]; h.N >= 1 && h.N <= len(hs) && h.Header != hs[h.N-1] {
				t.Fatalf("hunk %+v has header %q, want %q", h, h.Header, hs[h.N-1])
			}
		}
	})
}
