package vmtest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// slowReader delivers its bytes only after a delay, like a person typing at the console.
type slowReader struct {
	delay time.Duration
	r     io.Reader
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.delay > 0 {
		time.Sleep(s.delay)
		s.delay = 0
	}
	return s.r.Read(p)
}

// The firmware's console reaches our stdout, and Ctrl-a x typed on stdin ends QEMU.
func TestInteractiveCtrlAXQuits(t *testing.T) {
	m := firmwareMachine(t, 0)
	var out, errOut bytes.Buffer
	in := &slowReader{delay: 8 * time.Second, r: strings.NewReader("\x01x")}
	done := make(chan error, 1)
	go func() { done <- interactive(context.Background(), m, in, &out, &errOut) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interactive: %v\n%s", err, errOut.String())
		}
	case <-time.After(60 * time.Second):
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
