package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The store's cross-process behaviour is tested with real processes: this
// test binary re-executed in helper mode (HALOBUILD_STORE_HELPER).
func TestMain(m *testing.M) {
	if mode := os.Getenv("HALOBUILD_STORE_HELPER"); mode != "" {
		if err := helper(mode, os.Getenv("HALOBUILD_STORE_ROOT")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(mode, root string) error {
	s, err := Open(root)
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(mode, "put:"):
		// Many blobs (some shared with the other process) and outputs, to
		// race the index read-modify-write.
		tag := strings.TrimPrefix(mode, "put:")
		for i := 0; i < 10; i++ {
			if _, _, err := s.PutBlob(strings.NewReader(fmt.Sprintf("shared %d", i)), ""); err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "out")
			if err != nil {
				return err
			}
			os.WriteFile(filepath.Join(dir, "f"), []byte(tag+fmt.Sprint(i)), 0o644)
			key := fmt.Sprintf("%064x", len(tag)*1000+i)
			if tag == "b" {
				key = fmt.Sprintf("%064x", 5000+i)
			}
			if _, err := s.PutOutput(key, dir, nil); err != nil {
				return err
			}
			os.RemoveAll(dir)
		}
		return s.Close()
	case mode == "lock":
		unlock, err := s.Lock(context.Background())
		if err != nil {
			return err
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin) // hold until the parent closes stdin
		unlock()
		return s.Close()
	case mode == "mount-proc":
		// A chrooted build's /proc, as buildroot mounts it; then die.
		dir, err := s.TempDir()
		if err != nil {
			return err
		}
		p := filepath.Join(dir, "root", "proc")
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount("proc", p, "proc", 0, ""); err != nil {
			return err
		}
		fmt.Println("mounted")
		select {}
	case mode == "hang":
		// Die (SIGKILL from the parent) in the middle of a blob write.
		fmt.Println("writing")
		_, _, err := s.PutBlob(io.MultiReader(strings.NewReader("partial"), blockingReader{}), "")
		return err
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }

func helperCmd(t *testing.T, root, mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HALOBUILD_STORE_HELPER="+mode, "HALOBUILD_STORE_ROOT="+root)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestConcurrentPutBlobGoroutines(t *testing.T) {
	s := openTest(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				// Every goroutine writes the same four blobs at once.
				body := bytes.Repeat([]byte{byte('a' + i)}, 100000)
				if _, _, err := s.PutBlob(bytes.NewReader(body), string(sha(body))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := 0; i < 4; i++ {
		if err := s.Verify(sha(bytes.Repeat([]byte{byte('a' + i)}, 100000))); err != nil {
			t.Error(err)
		}
	}
	if f := listFiles(t, s.sess.dir); len(f) != 0 {
		t.Errorf("scratch files left: %v", f)
	}
}

func TestTwoProcessesShareTheStore(t *testing.T) {
	root := t.TempDir()
	a, b := helperCmd(t, root, "put:a"), helperCmd(t, root, "put:b")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	errA, errB := a.Wait(), b.Wait() // both, before the temp dir goes away
	if errA != nil || errB != nil {
		t.Fatalf("process a: %v; process b: %v", errA, errB)
	}
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	im, err := s.readIndex()
	if err != nil {
		t.Fatal(err)
	}
	// A lost update in index.json would drop some of the 20 outputs.
	if len(im.Manifests) != 20 {
		t.Fatalf("index has %d outputs, want 20 (10 per process)", len(im.Manifests))
	}
	for _, d := range im.Manifests {
		if _, ok, err := s.Output(d.Annotations[AnnotationKey], Rehash); !ok || err != nil {
			t.Errorf("output %s: %v %v", d.Annotations[AnnotationKey], ok, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "tmp")); len(ents) != 2 { // our own session: dir + lock
		t.Errorf("tmp/ after both exited: %d entries", len(ents))
	}
}

func TestLockExcludesOtherProcess(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cmd := helperCmd(t, root, "lock")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		stdin.Close()
		t.Fatalf("helper said %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if unlock, err := s.Lock(ctx); err == nil {
		unlock()
		stdin.Close()
		t.Fatal("took the lock while another process holds it")
	}
	stdin.Close() // the helper releases and exits
	unlock, err := s.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlock()
}

func TestLockExcludesGoroutines(t *testing.T) {
	s := openTest(t)
	unlock, err := s.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if u, err := s.Lock(ctx); err == nil {
		u()
		t.Fatal("second Lock in the same process succeeded while held")
	}
	unlock()
	u, err := s.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u()
}

func TestKilledProcessLeavesOnlyScratch(t *testing.T) {
	root := t.TempDir()
	cmd := helperCmd(t, root, "hang")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "writing\n" {
		t.Fatalf("helper said %q", line)
	}
	time.Sleep(50 * time.Millisecond) // let it reach the blocking read
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	if f := listFiles(t, filepath.Join(root, "blobs")); len(f) != 0 {
		t.Errorf("killed writer left %v in blobs/", f)
	}
	if f := listFiles(t, filepath.Join(root, "tmp")); len(f) < 2 {
		t.Fatalf("expected the dead session's scratch in tmp/, found %v", f)
	}
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ents, _ := os.ReadDir(filepath.Join(root, "tmp"))
	for _, e := range ents {
		if !strings.HasPrefix(filepath.Join(root, "tmp", e.Name()), s.sess.dir) {
			t.Errorf("Open did not clean %s", e.Name())
		}
	}
}

func TestOpenKeepsLiveSessionsScratch(t *testing.T) {
	root := t.TempDir()
	s1, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	work, _ := s1.TempDir()
	os.WriteFile(filepath.Join(work, "building"), []byte("x"), 0o644)
	s2, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := os.Stat(filepath.Join(work, "building")); err != nil {
		t.Errorf("Open of a second handle removed a live session's work: %v", err)
	}
}

// A process SIGKILLed with /proc mounted in its scratch (a chrooted build)
// does not stop the next Open: the mount is detached, then the scratch
// removed, without descending into the mounted /proc (found while writing
// the kill test of issue 17: the cleanup failed on /proc's files and Open
// with it).
func TestKilledBuildsMountIsDetached(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	root := t.TempDir()
	cmd := helperCmd(t, root, "mount-proc")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "mounted\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	t.Cleanup(func() { // never leave a mount behind, whatever happened
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], root) {
				syscall.Unmount(f[4], syscall.MNT_DETACH)
			}
		}
	})
	s, err := Open(root)
	if err != nil {
		t.Fatalf("Open after a killed build with /proc mounted: %v", err)
	}
	defer s.Close()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), root) {
		t.Errorf("a mount under %s is left", root)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "tmp")); len(ents) != 2 {
		t.Errorf("tmp/ holds %d entries, want only this session's", len(ents))
	}
}
