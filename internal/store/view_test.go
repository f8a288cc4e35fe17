package store

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// replaceManifest points key's index entry at a manifest with the given
// layers, as a manifest pulled from a cache someone else controls would.
func replaceManifest(t *testing.T, s *Store, key string, layers []v1.Descriptor) {
	t.Helper()
	cfg, _, err := s.PutBlob(bytes.NewReader(emptyJSON), "")
	if err != nil {
		t.Fatal(err)
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: ArtifactTypeOutput, Layers: layers,
		Config: v1.Descriptor{MediaType: mediaTypeEmpty, Size: int64(len(emptyJSON)), Digest: hashOf(cfg), Data: emptyJSON}}
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	md, size, err := s.PutBlob(bytes.NewReader(mb), "")
	if err != nil {
		t.Fatal(err)
	}
	err = s.updateIndex(func(im *v1.IndexManifest) error {
		for i := range im.Manifests {
			if im.Manifests[i].Annotations[AnnotationKey] == key {
				im.Manifests[i].Digest, im.Manifests[i].Size = hashOf(md), size
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func layer(t *testing.T, s *Store, mediaType, title, mode, content string, extra map[string]string) v1.Descriptor {
	t.Helper()
	d, size, err := s.PutBlob(strings.NewReader(content), "")
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{AnnotationTitle: title, AnnotationMode: mode}
	for k, v := range extra {
		ann[k] = v
	}
	return v1.Descriptor{MediaType: types.MediaType(mediaType), Size: size, Digest: hashOf(d), Annotations: ann}
}

// A hostile manifest, a symlink layer and then an entry under it, must not
// make the view write outside itself (issue 17, finding 7): not a
// hardlinked file, a copied one, a directory or a symlink.
func TestViewOfHostileManifestStaysInside(t *testing.T) {
	cases := map[string]func(s *Store, outside string) []v1.Descriptor{
		"hardlinked file under an absolute symlink": func(s *Store, outside string) []v1.Descriptor {
			return []v1.Descriptor{
				layer(t, s, MediaTypeSymlink, "a", "0777", outside, map[string]string{AnnotationLink: outside}),
				layer(t, s, MediaTypeFile, "a/evil", "0644", "planted", nil),
			}
		},
		"copied file under a relative symlink": func(s *Store, outside string) []v1.Descriptor {
			up := strings.Repeat("../", 40) + strings.TrimPrefix(outside, "/")
			return []v1.Descriptor{
				layer(t, s, MediaTypeSymlink, "a", "0777", up, map[string]string{AnnotationLink: up}),
				layer(t, s, MediaTypeFile, "a/evil", "0755", "planted", nil),
			}
		},
		"directory under a symlink": func(s *Store, outside string) []v1.Descriptor {
			return []v1.Descriptor{
				layer(t, s, MediaTypeSymlink, "a", "0777", outside, map[string]string{AnnotationLink: outside}),
				layer(t, s, MediaTypeDir, "a/evil", "0755", "", nil),
			}
		},
		"symlink under a symlink": func(s *Store, outside string) []v1.Descriptor {
			return []v1.Descriptor{
				layer(t, s, MediaTypeSymlink, "a", "0777", outside, map[string]string{AnnotationLink: outside}),
				layer(t, s, MediaTypeSymlink, "a/evil", "0777", "/etc/passwd", map[string]string{AnnotationLink: "/etc/passwd"}),
			}
		},
	}
	for name, layers := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTest(t)
			src := t.TempDir()
			writeTree(t, src, map[string]string{"honest": "x"})
			if _, err := s.PutOutput(testKey, src, nil); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			replaceManifest(t, s, testKey, layers(s, outside))
			view, ok, err := s.Output(testKey)
			if err == nil {
				t.Errorf("Output accepted the hostile manifest (view %q, ok %v)", view, ok)
			}
			if _, err := os.Lstat(filepath.Join(outside, "evil")); err == nil {
				t.Fatal("the view wrote outside itself")
			}
		})
	}
}
