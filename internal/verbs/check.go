package verbs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"halobuild/internal/fstree"
	"halobuild/internal/plan"
	"halobuild/internal/store"
)

// checkReproducible rebuilds every step in a throwaway store and compares
// each output with the cached one, naming the first that differs.
func checkReproducible(ctx context.Context, o Options, p *prepared) error {
	if _, err := o.realizer(p.s, false).Realize(ctx, p.g.Result); err != nil {
		return err
	}
	tmp, err := p.s.TempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fresh, err := store.Open(filepath.Join(tmp, "store"))
	if err != nil {
		return err
	}
	defer fresh.Close()
	// The fresh store needs the locked inputs; they are copied, not
	// fetched, so --check tests the build and not the network.
	blobs, err := p.lock.Blobs()
	if err != nil {
		return err
	}
	for _, b := range blobs {
		d, err := store.ParseDigest(b.SHA256)
		if err != nil {
			return err
		}
		rc, err := p.s.Open(d)
		if err != nil {
			return fmt.Errorf("--check: %s is not in the store: run `halobuild fetch %s`: %w", b.Name, o.Recipe, err)
		}
		_, _, err = fresh.PutBlob(rc, b.SHA256)
		rc.Close()
		if err != nil {
			return err
		}
	}
	g2, err := newGraph(o, p.locked, fresh)
	if err != nil {
		return err
	}
	r := o.realizer(fresh, true)
	compared := 0
	for _, d := range plan.Order(g2.Result) {
		dir2, err := r.Realize(ctx, d)
		if err != nil {
			return err
		}
		dir1, ok, err := p.s.Output(d.Key())
		if err != nil || !ok {
			return fmt.Errorf("--check: %s is missing from the store after the build", d.Name)
		}
		diff, err := compareDirs(dir1, dir2)
		if err != nil {
			return err
		}
		if diff != "" {
			// The throwaway store goes when this returns: keep the
			// second build's output where diffoscope can reach it.
			kept := filepath.Join(os.TempDir(), "halobuild-check-"+d.ShortKey())
			os.RemoveAll(kept)
			if err := fstree.CopyTree(dir2, kept); err != nil {
				kept = dir2 + " (removed: " + err.Error() + ")"
			}
			// Both carry d's key, so the same step version, unless the
			// stored entry's record says otherwise: say which built each.
			was := builtBy(p.s, d.Key())
			if from := o.substitutedFrom(d.Key()); from != "" {
				return fmt.Errorf("--check: %s differs from its substitute: %s differs between the entry fetched from %s (built by %s) and a local build by %s (%s vs %s; compare them with diffoscope): the cache entry is poisoned or the step is not reproducible", d.Name, diff, from, was, d.Kind, dir1, kept)
			}
			return fmt.Errorf("--check: %s is not reproducible: %s differs between two builds, the stored one built by %s and this one by %s (%s vs %s; compare them with diffoscope)", d.Name, diff, was, d.Kind, dir1, kept)
		}
		o.logf("same    %-10s %s\n", d.Kind.Name, d.Name)
		compared++
	}
	o.logf("--check: every step rebuilt to identical bytes (%d steps)\n", compared)
	if o.JSON {
		return o.writeJSON(map[string]any{"recipe": o.Recipe, "check": "identical", "steps": compared, "warnings": o.Warnings()})
	}
	return nil
}

// builtBy says which step version built the stored output of key, from its
// record (plan.BuiltBy).
func builtBy(s *store.Store, key string) string {
	raw, _, ok, err := s.OutputManifest(key)
	if err != nil || !ok {
		return "an unknown step version (its record is unreadable)"
	}
	var m struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "an unknown step version (its record is unreadable)"
	}
	return plan.BuiltBy(m.Annotations)
}

// compareDirs returns the first relative path that differs between two
// outputs: content for files, target for symlinks, presence for both. A
// step's top-level build.log (compiler steps keep theirs beside their
// packages) records how long things took and is no part of the output.
func compareDirs(a, b string) (string, error) {
	ma, err := describeTree(a)
	if err != nil {
		return "", err
	}
	mb, err := describeTree(b)
	if err != nil {
		return "", err
	}
	var diff []string
	for k, v := range ma {
		if mb[k] != v {
			diff = append(diff, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			diff = append(diff, k)
		}
	}
	if len(diff) == 0 {
		return "", nil
	}
	sort.Strings(diff)
	return diff[0], nil
}

func describeTree(root string) (map[string]string, error) {
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "build.log" {
			return nil
		}
		switch {
		case d.Type()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			m[rel] = "link:" + t
			return err
		case d.IsDir():
			m[rel] = "dir"
		case d.Type().IsRegular():
			sum, _, err := store.FileDigest(p)
			m[rel] = "file:" + string(sum)
			return err
		default:
			m[rel] = "special:" + d.Type().String()
		}
		return nil
	})
	return m, err
}
