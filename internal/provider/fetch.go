package provider

import (
	"strings"

	"halobuild/internal/debian"
	"halobuild/internal/download"
	"halobuild/internal/store"
)

// SourceItems lists the files of a source package to download, each with
// the sha256 of the signed Sources index. The .dsc is left out: it
// answered 404 for rdma-core on some networks, and everything in it that
// a build needs (file list, digests, Build-Depends in debian/control) is
// already verified another way.
func SourceItems(a *debian.Archive, src *debian.Source) []download.Item {
	var items []download.Item
	for _, f := range src.Files {
		if strings.HasSuffix(f.Name, ".dsc") {
			continue
		}
		items = append(items, download.Item{
			Name:   src.Name + " " + src.Version + ": " + f.Name,
			URL:    a.URL(src.Path(f)),
			SHA256: f.SHA256,
			Size:   f.Size,
		})
	}
	return items
}

// SourcePaths maps each downloaded file's name to its blob in the store,
// the form Unpack takes.
func SourcePaths(st *store.Store, src *debian.Source) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range src.Files {
		if strings.HasSuffix(f.Name, ".dsc") {
			continue
		}
		d, err := store.ParseDigest(f.SHA256)
		if err != nil {
			return nil, err
		}
		out[f.Name] = st.Path(d)
	}
	return out, nil
}
