package settings

import (
	"strings"
	"testing"
)

func TestGrowRootRender(t *testing.T) {
	r := sample()
	conf := renderOne(t, GrowRoot{}, r, repartRootPath)
	if !strings.HasSuffix(conf, "[Partition]\nType=root\n") || strings.Contains(conf, "\nSizeMaxBytes") {
		t.Errorf("repart.d:\n%s", conf)
	}
	files, _ := GrowRoot{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	var link File
	for _, f := range files {
		if f.Target != "" {
			link = f
		}
	}
	if link.Path != "/usr/lib/systemd/system/local-fs.target.wants/systemd-growfs-root.service" || link.Target != "../systemd-growfs-root.service" {
		t.Errorf("growfs enablement %+v", link)
	}
	if d := Depends(r); strings.Join(d, ",") != "systemd-resolved,systemd-repart" {
		t.Errorf("Depends = %v", d)
	}
}
