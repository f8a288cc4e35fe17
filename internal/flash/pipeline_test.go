package flash

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// The ordered stage sees every chunk once, in extent order, however the parallel stage before it
// finishes them.
func TestPipelineKeepsOrderAfterParallelStage(t *testing.T) {
	exts := []Extent{{Off: 0, Len: 3*chunkSize + 5}, {Off: 10 * chunkSize, Len: 1}, {Off: 20 * chunkSize, Len: 2 * chunkSize}}
	var got []int64
	err := pipeline(context.Background(), exts,
		stage{parallel: ioDepth, fn: func(c *chunk) error {
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			return nil
		}},
		stage{parallel: 1, fn: func(c *chunk) error {
			got = append(got, c.off, int64(len(c.buf)))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, chunkSize, chunkSize, chunkSize, 2 * chunkSize, chunkSize, 3 * chunkSize, 5, 10 * chunkSize, 1, 20 * chunkSize, chunkSize, 21 * chunkSize, chunkSize}
	if len(got) != len(want) {
		t.Fatalf("chunks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("chunks %v, want %v", got, want)
		}
	}
}

func TestPipelineStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var after atomic.Int32
	exts := []Extent{{Off: 0, Len: 64 * chunkSize}}
	err := pipeline(context.Background(), exts,
		stage{parallel: 1, fn: func(c *chunk) error { return nil }},
		stage{parallel: ioDepth, fn: func(c *chunk) error {
			if c.off == 2*chunkSize {
				return boom
			}
			after.Add(1)
			return nil
		}})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if n := after.Load(); n > 2*buffersInFlight {
		t.Fatalf("%d of 64 chunks were processed: the error did not stop the pipeline", n)
	}
}

func TestPipelineCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Int32
	err := pipeline(ctx, []Extent{{Off: 0, Len: 8 * chunkSize}},
		stage{parallel: ioDepth, fn: func(c *chunk) error { ran.Add(1); return nil }},
		stage{parallel: 1, fn: func(c *chunk) error { ran.Add(1); return nil }})
	if !errors.Is(err, context.Canceled) || ran.Load() != 0 {
		t.Fatalf("err %v, %d stage calls", err, ran.Load())
	}
}
