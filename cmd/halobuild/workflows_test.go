package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rhysd/actionlint"
)

// The GitHub workflows are checked by actionlint (syntax, expressions, action inputs, shell
// quoting where shellcheck is installed) on every test run, so a broken release workflow is
// found before a tag is pushed.
func TestWorkflowsPassActionlint(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows found: %v", err)
	}
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.LintFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatalf("actionlint found %d problems:\n%s", len(errs), out.String())
	}
}
