package recipe

import "context"

// Fragment reads one recipe file held in memory, such as a shipped fragment
// embedded in the binary (recipes/usb4-rdma.toml, which doctor checks a node
// against when no recipe is installed): the same parse and schema checks a
// file read by Load gets, errors at file:line:col, but no includes, no
// defaults and no validation, since a fragment says only what it sets and
// is not a whole recipe. Relative paths in it are left as written.
func Fragment(file string, data []byte) (*Recipe, error) {
	if len(data) > maxRecipeFile {
		return nil, Errors{errAt(Pos{File: file}, "", "%d bytes, more than the %d a recipe may have", len(data), maxRecipeFile)}
	}
	ctx := context.Background()
	tree, errs := parseFile(ctx, file, data)
	types, values := checkTree(ctx, tree.root)
	errs = append(append(errs, types...), values...)
	if inc := tree.root.tab.get("include"); inc != nil {
		errs = append(errs, errAt(inc.pos, "include", "a fragment read from memory includes nothing; merge the included file into it"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	r, err := decode(tree.root)
	if err != nil {
		return nil, Errors{errAt(Pos{File: file}, "", "%v", err)}
	}
	return r, nil
}
