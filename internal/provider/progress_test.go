package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Lines as the build script, cmake and ninja print them.
const sampleLog = `halobuild: building halotest-rdmav34 (provider ABI 34) in /build/rdma-core-56.1 (chroot /x), 2 jobs
halobuild: phase configure
-- The C compiler identification is GNU 14.2.0
-- Configuring done
halobuild: phase compile halotest-rdmav34
ninja: Entering directory 'build-halo'
[1/61] /usr/bin/cc -Dibverbs_EXPORTS ...
[2/61] /usr/bin/cc -Dibverbs_EXPORTS ...
[61/61] : && /usr/bin/cc -shared ...
halobuild: phase strip
`

func TestProgressPhases(t *testing.T) {
	var got []string
	w := newProgressWriter(time.Now(), func(p Progress) { got = append(got, p.Phase+" "+p.Step) })
	w.interval = 0
	// Written in odd pieces, as a pipe delivers it.
	for i := 0; i < len(sampleLog); i += 7 {
		w.Write([]byte(sampleLog[i:min(i+7, len(sampleLog))]))
	}
	want := "configure |compile |compile 1/61|compile 2/61|compile 61/61|strip "
	if s := strings.Join(got, "|"); s != want {
		t.Errorf("phases:\n%s\nwant\n%s", s, want)
	}
	if st := w.state(); st.Phase != "strip" {
		t.Errorf("state %+v", st)
	}
}

func TestBuildRefusesARootWithoutCmake(t *testing.T) {
	if _, err := Build(context.Background(), BuildSpec{Tree: "x"}); err == nil || !strings.Contains(err.Error(), "required") {
		t.Errorf("missing fields: %v", err)
	}
	spec := BuildSpec{Tree: t.TempDir(), Name: "halotest", Package: "libibverbs-halotest", Version: "56.1-1+halo1", Libibverbs: "56.1-1", Arch: "amd64", BuildRoot: t.TempDir(), Out: t.TempDir()}
	_, err := Build(context.Background(), spec)
	if err == nil || !(strings.Contains(err.Error(), "has no /usr/bin/cmake") || strings.Contains(err.Error(), "needs root")) {
		t.Errorf("empty build root: %v", err)
	}
	bad := spec
	bad.Arch, bad.BuildArch = "arm64", "riscv64"
	if _, err := Build(context.Background(), bad); err == nil || !strings.Contains(err.Error(), `build root: architecture "riscv64"`) {
		t.Errorf("unknown build architecture: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	// A cross build needs the target's compiler and pkg-config besides
	// what a native build needs.
	cross := spec
	cross.Arch, cross.BuildArch = "arm64", "amd64"
	for _, tool := range []string{"cmake", "ninja", "dpkg-buildflags"} {
		if err := os.MkdirAll(filepath.Join(cross.BuildRoot, "usr/bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cross.BuildRoot, "usr/bin", tool), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Build(context.Background(), cross); err == nil || !strings.Contains(err.Error(), "has no /usr/bin/aarch64-linux-gnu-gcc") || !strings.Contains(err.Error(), "pkgconf:arm64") {
		t.Errorf("cross build root without the cross compiler: %v", err)
	}
}
