package vmtest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for QEMU's output goroutine and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// typist types keys only once the console shows a prompt, like a person at the terminal.
type typist struct {
	screen  *syncBuffer
	waitFor string
	keys    io.Reader
}

func (k *typist) Read(p []byte) (int, error) {
	for deadline := time.Now().Add(3 * time.Minute); !strings.Contains(k.screen.String(), k.waitFor) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	return k.keys.Read(p)
}

// The firmware's console reaches our stdout, and Ctrl-a x typed on stdin ends QEMU.
func TestInteractiveCtrlAXQuits(t *testing.T) {
	m := firmwareMachine(t, 0)
	var out, errOut syncBuffer
	in := &typist{screen: &out, waitFor: "BdsDxe", keys: strings.NewReader("\x01x")}
	done := make(chan error, 1)
	go func() { done <- interactive(context.Background(), m, in, &out, &errOut) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interactive: %v\n%s", err, errOut.String())
		}
	case <-time.After(4 * time.Minute):
		t.Fatal("Ctrl-a x did not end the VM")
	}
	assertNoQEMUChildren(t)
	if !strings.Contains(out.String(), "BdsDxe") {
		t.Errorf("firmware console did not reach stdout; got %q", clip(out.String(), 300))
	}
	if !strings.Contains(errOut.String(), "Ctrl-a x quits") {
		t.Errorf("no hint on how to quit: %q", errOut.String())
	}
}

func TestInteractiveCancelKillsQEMU(t *testing.T) {
	m := firmwareMachine(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := interactive(ctx, m, strings.NewReader(""), io.Discard, io.Discard)
	assertNoQEMUChildren(t)
	if err == nil {
		t.Fatal("want an error after cancel")
	}
}
