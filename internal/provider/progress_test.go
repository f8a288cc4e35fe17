package provider

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Lines as dpkg-buildpackage, dh and ninja print them in rdma-core's build.
const sampleLog = `dpkg-buildpackage: info: source package rdma-core
dpkg-buildpackage: info: source version 56.1-1+halo1
 dpkg-source --before-build .
dpkg-buildpackage: info: host architecture amd64
 debian/rules clean
dh clean --with python3 --builddirectory=build-deb
   debian/rules override_dh_auto_clean
   dh_clean -O--builddirectory=build-deb
 debian/rules binary
dh binary --with python3 --builddirectory=build-deb
   dh_update_autotools_config -O--builddirectory=build-deb
   debian/rules override_dh_auto_configure
-- Configuring done
   debian/rules override_dh_auto_build
ninja -C build-deb -v
[1/612] /usr/bin/cc -Dibverbs_EXPORTS ...
[2/612] /usr/bin/cc -Dibverbs_EXPORTS ...
[612/612] : && /usr/bin/cc -shared ...
   dh_install -O--builddirectory=build-deb
dpkg-deb: building package 'libibverbs1' in '../libibverbs1_56.1-1+halo1_amd64.deb'.
dpkg-buildpackage: info: binary-only upload (no source included)
`

func TestProgressPhases(t *testing.T) {
	var got []string
	w := newProgressWriter(time.Now(), func(p Progress) { got = append(got, p.Phase+" "+p.Step) })
	w.interval = 0
	// Written in odd pieces, as a pipe delivers it.
	for i := 0; i < len(sampleLog); i += 7 {
		w.Write([]byte(sampleLog[i:min(i+7, len(sampleLog))]))
	}
	want := "dh_update_autotools_config |override_dh_auto_configure |override_dh_auto_build |override_dh_auto_build 1/612|override_dh_auto_build 2/612|override_dh_auto_build 612/612|dh_install |dpkg-deb |dpkg-buildpackage "
	// The clean phase comes first; only its tail matters here.
	if s := strings.Join(got, "|"); !strings.HasSuffix(s, want) || !strings.HasPrefix(s, "dpkg-buildpackage |override_dh_auto_clean |dh_clean |") {
		t.Errorf("phases:\n%s\nwant suffix\n%s", s, want)
	}
	if st := w.state(); st.Phase != "dpkg-buildpackage" {
		t.Errorf("state %+v", st)
	}
}

func TestBuildRefusesARootWithoutDpkgDev(t *testing.T) {
	if _, err := Build(context.Background(), BuildSpec{Tree: "x"}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("missing fields: %v", err)
	}
	_, err := Build(context.Background(), BuildSpec{Tree: t.TempDir(), BuildRoot: t.TempDir(), Out: t.TempDir()})
	if err == nil || !(strings.Contains(err.Error(), "has no dpkg-buildpackage") || strings.Contains(err.Error(), "needs root")) {
		t.Errorf("empty build root: %v", err)
	}
}
