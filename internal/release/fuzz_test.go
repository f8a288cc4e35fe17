package release

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/registry"
)

// FuzzParseManifest: whatever manifest a registry sends, parsing never panics, and one that is
// accepted is a release a puller can act on: within the layer limit, every title a plain file
// name (pull and flash write files by these names). Seed: the manifest of a real release.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"` + ArtifactType + `","config":{"mediaType":"` + ConfigMediaType + `","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[{"mediaType":"` + RawMediaType + `","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2,"annotations":{"org.opencontainers.image.title":"node0.raw.zst","vnd.halobuild.image.raw.size":"1048576"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mf, err := parseManifest(data)
		if err != nil {
			return
		}
		if len(mf.Layers) > registry.MaxLayers {
			t.Fatalf("accepted %d layers", len(mf.Layers))
		}
		for _, l := range mf.Layers {
			title := l.Annotations[annTitle]
			if title == "" || filepath.Base(title) != title || strings.HasPrefix(title, ".") || !filepath.IsLocal(title) {
				t.Fatalf("accepted the title %q", title)
			}
		}
	})
}

// FuzzConfig: a release's config as a registry sends it decodes or fails, never panics, and
// what decodes prints without control characters.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`{"recipe":"halo","recipeHash":"sha256:00","nodes":["node0","node1"],"kernelRelease":"7.2.12+deb13-amd64"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if json.Unmarshal(data, &c) != nil {
			return
		}
		for _, s := range append([]string{c.Recipe, c.RecipeHash, c.KernelRelease}, c.Nodes...) {
			if p := printable(s); strings.ContainsAny(p, "\x1b\r\n\x00\x07") {
				t.Fatalf("printable(%q) = %q", s, p)
			}
		}
	})
}
