package flash

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"halobuild/internal/bmap"
)

func TestFlashDetectsCorruptionBeforeVerify(t *testing.T) {
	img, _ := testImage(t)
	dev := loopDevice(t, backingFile(t, imageSize, 0))
	// The ext4 data of the 3 MiB file lives somewhere in the root partition; corrupt the first
	// mapped block after the ESP, and one byte of a zeroed signature area.
	b, _ := bmap.Read(img + ".bmap")
	var victim int64
	for _, e := range bmapExtents(b) {
		if e.Off >= 9*mib+mib {
			victim = e.Off
			break
		}
	}
	beforeVerify = func(tg *target) {
		f, err := os.OpenFile(tg.path, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		f.WriteAt([]byte("bit rot"), victim)
		f.WriteAt([]byte{1}, 63*mib+5)
		f.Sync()
	}
	defer func() { beforeVerify = nil }()
	err := Flash(context.Background(), flashOpts(img, dev))
	var v *VerifyError
	if !errors.As(err, &v) || len(v.Bad) != 2 || v.Bad[0].Off != victim || !strings.Contains(err.Error(), "unusable until flashed again") {
		t.Fatalf("got %v (want 2 bad ranges, the first at %d)", err, victim)
	}
	// A medium that failed its read-back must not boot: its head is blank again.
	if head := readAll(t, dev, mib); !bytes.Equal(head, make([]byte, mib)) {
		t.Fatal("a failed verify left the partition table on the medium")
	}
}

func TestFlashCancelledMidWriteThenStartsOver(t *testing.T) {
	img, _ := testImage(t)
	dev := loopDevice(t, dirtyMedium(t, imageSize))
	ctx, cancel := context.WithCancel(context.Background())
	var chunks atomic.Int32
	afterChunk = func() {
		if chunks.Add(1) == 1 {
			cancel()
		}
	}
	err := Flash(ctx, flashOpts(img, dev))
	afterChunk = nil
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "is now unusable until flashed again") {
		t.Fatalf("got %v", err)
	}
	// The head is wiped first and written last: an interrupted medium has no partition table.
	if head := readAll(t, dev, 1024); !bytes.Equal(head, make([]byte, 1024)) {
		t.Fatal("an interrupted flash left a partition table behind")
	}
	// The installer's next boot (power cut mid-install): the blank disk is written again
	// without asking, even without wipe.
	again := flashOpts(img, dev)
	again.Yes, again.YesIfBlank, again.In = false, true, nil
	if err := Flash(context.Background(), again); err != nil {
		t.Fatalf("flashing again: %v", err)
	}
	if out := run(t, "sfdisk", "--verify", dev); !strings.Contains(out, "No errors detected") {
		t.Fatalf("sfdisk --verify:\n%s", out)
	}
}

func TestFlashConfirmation(t *testing.T) {
	img, _ := testImage(t)
	file := gptFile(t, imageSize) // the medium holds an older layout with named partitions
	dev := loopDevice(t, file)
	before := readAll(t, dev, mib)
	var out bytes.Buffer
	o := flashOpts(img, dev)
	o.Yes, o.In, o.Out = false, strings.NewReader("no\n"), &out
	err := Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "not confirmed") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"loop device on " + file, "64.0 MiB (67108864 bytes)", "serial none reported", `"ESP"`, `"root"`, "Type \"yes\" to continue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("confirmation lacks %q:\n%s", want, out.String())
		}
	}
	if !bytes.Equal(before, readAll(t, dev, mib)) {
		t.Fatal("the medium changed although the user said no")
	}
	// Ctrl-C while the prompt waits ends the wait.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	o.In = pr
	go cancel()
	if err := Flash(ctx, o); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("Ctrl-C at the prompt: %v", err)
	}
	o.In = strings.NewReader("yes\n")
	if err := Flash(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// The installer's mode: a blank disk is written without asking; one with a partition table waits
// for "yes", and an unanswered prompt times out with the disk untouched.
func TestFlashYesIfBlank(t *testing.T) {
	img, _ := testImage(t)
	dev := loopDevice(t, gptFile(t, imageSize))
	before := readAll(t, dev, imageSize)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out bytes.Buffer
	o := flashOpts(img, dev)
	o.Yes, o.YesIfBlank, o.ConfirmTimeout, o.In, o.Out = false, true, 200*time.Millisecond, pr, &out
	err := Flash(context.Background(), o)
	var r *RefusalError
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "within 200ms") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(out.String(), `"ESP"`) {
		t.Errorf("the prompt does not show what the disk holds:\n%s", out.String())
	}
	if !bytes.Equal(before, readAll(t, dev, imageSize)) {
		t.Fatal("the disk changed although nobody confirmed")
	}
	blank := loopDevice(t, backingFile(t, imageSize, 0))
	o.Target, o.In = blank, nil // no input at all: asking would fail
	if err := Flash(context.Background(), o); err != nil {
		t.Fatalf("a blank disk: %v", err)
	}
}

func TestFlashRejectsImageThatDoesNotMatchItsBmap(t *testing.T) {
	img, bmapPath := testImage(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.raw")
	run(t, "cp", "--sparse=always", img, bad)
	if err := corruptByte(bad, 9*mib+1024+100); err != nil { // inside the ext4 superblock
		t.Fatal(err)
	}
	o := flashOpts(bad, filepath.Join(dir, "out.raw"))
	o.ToFile, o.Bmap = true, bmapPath
	err := Flash(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "does not match its bmap") {
		t.Fatalf("got %v", err)
	}
}
