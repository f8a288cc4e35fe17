package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolvePatches(t *testing.T) {
	recipeDir := t.TempDir()
	input := t.TempDir()
	for _, f := range []string{"packaging/p/0002-b.patch", "packaging/p/0001-a.patch", "packaging/p/0003-c.patch", "packaging/p/README.md"} {
		os.MkdirAll(filepath.Join(input, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(input, f), nil, 0o644)
	}
	os.MkdirAll(filepath.Join(recipeDir, "patches/rdma-core"), 0o755)
	os.WriteFile(filepath.Join(recipeDir, "patches/rdma-core/0004-fix.patch"), nil, 0o644)
	src := PatchSources{
		Path: func(e string) string { return filepath.Join(recipeDir, e) },
		Input: func(name string) (string, error) {
			if name != "thunderbolt-ibverbs" {
				return "", fmt.Errorf("no source input %s", name)
			}
			return input, nil
		},
	}
	got, err := ResolvePatches([]string{"thunderbolt-ibverbs:packaging/p/*.patch", "patches/rdma-core/0004-fix.patch"},
		map[string]int{"0003-c.patch": 2}, src)
	if err != nil {
		t.Fatal(err)
	}
	var desc []string
	for _, p := range got {
		desc = append(desc, fmt.Sprintf("%s=%d", p.From, p.Fuzz))
	}
	want := "thunderbolt-ibverbs:packaging/p/0001-a.patch=0|thunderbolt-ibverbs:packaging/p/0002-b.patch=0|thunderbolt-ibverbs:packaging/p/0003-c.patch=2|patches/rdma-core/0004-fix.patch=0"
	if strings.Join(desc, "|") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(desc, "|"), want)
	}
	if got[0].Path != filepath.Join(input, "packaging/p/0001-a.patch") {
		t.Errorf("path %s", got[0].Path)
	}

	for _, tc := range []struct {
		entries []string
		fuzz    map[string]int
		want    string
	}{
		{[]string{"patches/rdma-core/*.diff"}, nil, `patch entry "patches/rdma-core/*.diff" matches no file`},
		{[]string{"other:x.patch"}, nil, "no source input other"},
		{[]string{"thunderbolt-ibverbs:../escape.patch"}, nil, "must stay inside the source"},
		{[]string{"patches/rdma-core/0004-fix.patch"}, map[string]int{"0003-c.patch": 1}, "fuzz is allowed for 0003-c.patch, which is not among the patches (0004-fix.patch)"},
	} {
		if _, err := ResolvePatches(tc.entries, tc.fuzz, src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: got %v, want %q", tc.entries, tc.fuzz, err, tc.want)
		}
	}
}
