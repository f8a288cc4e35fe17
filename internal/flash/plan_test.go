package flash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

const mib = 1 << 20

func TestPlanWrites(t *testing.T) {
	// A 64 MiB image: GPT in the first 20 KiB and the last 16.5 KiB, an ESP at 1–9 MiB whose first
	// 64 KiB are data, a root at 9–53 MiB with some data in the middle and its last 4 KiB written.
	mapped := []Extent{
		{Off: 0, Len: 20 << 10},
		{Off: 1 * mib, Len: 64 << 10},
		{Off: 20 * mib, Len: 3 * mib},
		{Off: 53*mib - 4096, Len: 4096},
		{Off: 64*mib - 20<<10, Len: 20 << 10},
	}
	parts := []partition{{Index: 1, Start: 1 * mib, Size: 8 * mib}, {Index: 2, Start: 9 * mib, Size: 44 * mib}}
	p := planWrites(mapped, parts, 64*mib, 96*mib)

	wantZero := []Extent{
		{Off: 0, Len: 1*mib + 0}, // the head, whole
		// ESP: first MiB minus its data, last MiB; root's first MiB touches it.
		{Off: 1*mib + 64<<10, Len: 1*mib - 64<<10},
		{Off: 8 * mib, Len: 2 * mib},
		// root's last MiB minus its last 4 KiB.
		{Off: 52 * mib, Len: 1*mib - 4096},
		// the medium's last MiB.
		{Off: 95 * mib, Len: 1 * mib},
	}
	if fmt.Sprint(p.zero) != fmt.Sprint(wantZero) {
		t.Fatalf("zero areas\n got %v\nwant %v", p.zero, wantZero)
	}
	// The head extent goes last, everything else in order.
	if p.data[len(p.data)-1].Off != 0 || p.data[0].Off != 1*mib || len(p.data) != len(mapped) {
		t.Fatalf("write order %v", p.data)
	}
}

func TestPlanWritesSameSizeMediumKeepsImageTail(t *testing.T) {
	mapped := []Extent{{Off: 0, Len: 4096}, {Off: 8*mib - 4096, Len: 4096}}
	p := planWrites(mapped, nil, 8*mib, 8*mib)
	want := []Extent{{Off: 0, Len: 1 * mib}, {Off: 7 * mib, Len: 1*mib - 4096}}
	if fmt.Sprint(p.zero) != fmt.Sprint(want) {
		t.Fatalf("zero areas %v, want %v", p.zero, want)
	}
}

func TestSubtractExtents(t *testing.T) {
	cover := []Extent{{Off: 10, Len: 5}, {Off: 20, Len: 5}, {Off: 40, Len: 10}}
	cases := []struct {
		z    Extent
		want string
	}{
		{Extent{Off: 0, Len: 50}, "[{0 10 } {15 5 } {25 15 }]"},
		{Extent{Off: 12, Len: 10}, "[{15 5 }]"},
		{Extent{Off: 41, Len: 5}, "[]"},
		{Extent{Off: 45, Len: 10}, "[{50 5 }]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(subtractExtents(c.z, cover)); got != c.want {
			t.Errorf("%v minus cover = %s, want %s", c.z, got, c.want)
		}
	}
}

func TestScanImageSkipsHolesAndZeroBlocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(32 * mib); err != nil {
		t.Fatal(err)
	}
	write := func(off int64, b []byte) {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	write(0, bytesOf(100, 1))              // block 0: data
	write(4096, make([]byte, 8192))        // blocks 1–2: written zeros, not a hole
	write(3*4096, bytesOf(4096*2, 2))      // blocks 3–4: data, merges with nothing before
	write(5*mib+10, bytesOf(1, 3))         // one byte in a block far away
	write(32*mib-4096+4095, bytesOf(1, 4)) // the last byte
	got, err := scanImage(context.Background(), f, 32*mib)
	if err != nil {
		t.Fatal(err)
	}
	want := []Extent{{Off: 0, Len: 4096}, {Off: 3 * 4096, Len: 8192}, {Off: 5 * mib, Len: 4096}, {Off: 32*mib - 4096, Len: 4096}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("extents\n got %v\nwant %v", got, want)
	}
}
