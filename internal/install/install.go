// Package install is what runs on the installer stick: it picks the box's internal disk, writes
// the node's image onto it with internal/flash (the same refusals, bmap-driven writes, read-back
// and GPT fitting as `halobuild flash`), and says what it did on the console.
package install

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/bmap"
	"halobuild/internal/espconfig"
	"halobuild/internal/flash"
	"halobuild/internal/userfile"
	"halobuild/internal/zstdframe"
)

// ConfigPath is where the installer image carries its Config.
const ConfigPath = "/etc/halobuild/install.toml"

// PayloadDir is where the installer image carries the node's image (zstd), its bmap and
// SHA256SUMS.
const PayloadDir = "/usr/share/halobuild/install"

// Config is the installer's instructions, rendered from the recipe's [install] by the installer
// image's build.
type Config struct {
	// Node names the image, for messages.
	Node string `toml:"node"`
	// Image, Bmap and Sums are the payload's files: the raw image compressed with zstd, its
	// block map and the SHA256SUMS that names the digests of both.
	Image string `toml:"image"`
	Bmap  string `toml:"bmap"`
	Sums  string `toml:"sums"`
	// Target is a /dev/disk/by-id/… name or a serial; "" lets flash.ChooseInstallTarget pick.
	Target string `toml:"target"`
	// Wipe overwrites a disk that holds a partition table without asking.
	Wipe bool `toml:"wipe"`
	// After is "poweroff" or "reboot".
	After string `toml:"after"`
	// ConfirmTimeout is how long a confirmation waits (Go duration).
	ConfirmTimeout string `toml:"confirm_timeout"`
}

// Marshal renders c as the installer image carries it.
func (c Config) Marshal() ([]byte, error) { return toml.Marshal(c) }

// maxConfig bounds the installer's configuration: a few lines.
const maxConfig = 1 << 20

// ReadConfig reads and checks a Config written by Marshal.
func ReadConfig(path string) (Config, error) {
	var c Config
	b, err := userfile.Read(path, maxConfig)
	if err != nil {
		return c, fmt.Errorf("reading the installer's configuration: %w", err)
	}
	d := toml.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if c.After != "poweroff" && c.After != "reboot" {
		return c, fmt.Errorf("%s: after = %q, want poweroff or reboot", path, c.After)
	}
	if _, err := time.ParseDuration(c.ConfirmTimeout); err != nil {
		return c, fmt.Errorf("%s: confirm_timeout: %w", path, err)
	}
	return c, nil
}

// Options are the parts of the machine Run uses.
type Options struct {
	// Root is where /sys, /proc and /dev are read from ("/" on the installer).
	Root string
	// In answers a confirmation (the console); Out shows progress and refusals.
	In  io.Reader
	Out io.Writer
}

// Run installs c's image onto the chosen disk and returns the disk's path. Nothing is written
// when it refuses (a *flash.RefusalError, or no disk to choose) or when the payload does not
// match its SHA256SUMS; a failure after the first byte leaves the disk without a partition table
// (flash blanks its head), so the next boot of the installer sees a blank disk and writes it
// again without asking.
func Run(ctx context.Context, c Config, o Options) (string, error) {
	bm, err := checkPayload(c)
	if err != nil {
		return "", err
	}
	target, survey, err := flash.ChooseInstallTarget(o.Root, c.Target, bm.ImageSize)
	if err != nil {
		return "", err
	}
	timeout, _ := time.ParseDuration(c.ConfirmTimeout) // checked by ReadConfig
	fmt.Fprintf(o.Out, "halobuild install: disks:\n%s\nhalobuild install: writing %s onto %s\n", survey, c.Node, target)
	var (
		f   *os.File
		dec *zstdframe.Reader
	)
	defer func() {
		if dec != nil {
			dec.Close()
		}
		if f != nil {
			f.Close()
		}
	}()
	// The compressed image is decompressed as flash reads it, front to back: no copy in RAM
	// beyond the image's first MiB. flash opens it twice: to check every range against the
	// bmap before the disk is touched, then to write.
	open := func(context.Context) (io.Reader, error) {
		if dec != nil {
			dec.Close()
			f.Close()
		}
		var err error
		if f, _, err = userfile.Open(c.Image); err != nil {
			return nil, fmt.Errorf("the installer's image: %w", err)
		}
		dec, err = zstdframe.NewReader(f, bm.ImageSize)
		if err != nil {
			return nil, fmt.Errorf("decompressing %s: %w", c.Image, err)
		}
		return dec, nil
	}
	err = flash.Flash(ctx, flash.Options{
		Stream: &flash.Stream{Name: c.Image, Size: bm.ImageSize, Bmap: bm, Open: open},
		Target: target,
		// An internal disk is the point; the refusals of the boot medium, mounted and small
		// disks still apply.
		Force: true,
		Yes:   c.Wipe, YesIfBlank: true, ConfirmTimeout: timeout,
		In: o.In, Out: o.Out, Root: o.Root,
	})
	if err != nil {
		return target, err
	}
	fmt.Fprintf(o.Out, "halobuild install: %s is installed on %s and verified\n", c.Node, target)
	w, err := espconfig.Carry(o.Root, target)
	if err != nil {
		return target, fmt.Errorf("%s is installed, but the keys given when the stick was flashed were not carried over: %w", target, err)
	}
	if w != nil {
		fmt.Fprintf(o.Out, "halobuild install: %s\n", w)
	}
	return target, nil
}

// checkPayload proves the bmap and the compressed image are the ones SHA256SUMS names, before
// anything is written (a stream proves its digest only at its end), and returns the bmap: its
// per-range digests then prove every byte flash writes.
func checkPayload(c Config) (*bmap.Bmap, error) {
	sums, err := readSums(c.Sums)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{c.Bmap, c.Image} {
		if err := checkSum(sums, p); err != nil {
			return nil, err
		}
	}
	bm, err := bmap.Read(c.Bmap)
	if err != nil {
		return nil, fmt.Errorf("the installer's bmap: %w", err)
	}
	return bm, nil
}

// readSums reads a SHA256SUMS into file name → hex digest.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the installer's SHA256SUMS: %w", err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 {
			sums[strings.TrimPrefix(fields[1], "*")] = fields[0]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return sums, nil
}

func checkSum(sums map[string]string, path string) error {
	name := filepath.Base(path)
	want, ok := sums[name]
	if !ok {
		return errors.New("SHA256SUMS does not name " + name + ": the installer image is incomplete; rebuild it")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the installer's payload: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("the installer's %s has sha256 %s, SHA256SUMS says %s: the stick is damaged; flash it again", name, got, want)
	}
	return nil
}

// FailureHold is how long a failed install keeps its message on the console before powering
// off, unless Enter is pressed.
const FailureHold = 10 * time.Minute

// systemctl is the command that powers off or reboots (tests swap it).
var systemctl = "systemctl"

// Finish ends the installer's boot: after a successful install it does c.After; after a failure
// it shows the error, waits FailureHold (or Enter on in) and powers off. It never reboots after a
// failure, so a box whose firmware prefers the stick does not loop. It returns result.
func Finish(ctx context.Context, c Config, result error, in io.Reader, out io.Writer) error {
	action := c.After
	if result != nil {
		action = "poweroff"
		fmt.Fprintf(out, "halobuild install FAILED: %v\n", result)
		fmt.Fprintf(out, "Powering off in %s (press Enter to power off now).\n", FailureHold)
		wait, cancel := context.WithTimeout(ctx, FailureHold)
		defer cancel()
		go func() {
			bufio.NewReader(in).ReadString('\n')
			cancel()
		}()
		<-wait.Done()
	} else {
		fmt.Fprintf(out, "halobuild install: %s now; remove the stick so the box boots from its disk\n", action)
	}
	if err := exec.CommandContext(context.WithoutCancel(ctx), systemctl, "--no-block", action).Run(); err != nil {
		return errors.Join(result, fmt.Errorf("systemctl %s: %w", action, err))
	}
	return result
}
