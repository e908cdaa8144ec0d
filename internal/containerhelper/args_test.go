//go:build linux

package containerhelper

import (
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/session"
	"golang.org/x/sys/unix"
)

func TestServeArgs(t *testing.T) {
	for _, c := range []struct {
		args    []string
		lim     boundary.CommandLimits
		root    string
		wantErr string
	}{
		{args: []string{"/w"}, root: "/w"},
		{args: []string{"--cpu-time=2", "/w"}, lim: boundary.CommandLimits{CPUSeconds: 2}, root: "/w"},
		{args: []string{"--open-files=16", "/w"}, lim: boundary.CommandLimits{OpenFiles: 16}, root: "/w"},
		{args: []string{"--open-files=64", "--cpu-time=2", "/w"}, lim: boundary.CommandLimits{CPUSeconds: 2, OpenFiles: 64}, root: "/w"},
		{args: []string{"--cpu-time=4294967295", "/w"}, lim: boundary.CommandLimits{CPUSeconds: 4294967295}, root: "/w"},
		{args: nil, wantErr: "want one root"},
		{args: []string{""}, wantErr: "not an absolute path"},
		{args: []string{"w"}, wantErr: "not an absolute path"},
		{args: []string{"/w", "/x"}, wantErr: "unknown option"},
		{args: []string{"--cpu-time=2"}, wantErr: "not an absolute path"},
		{args: []string{"--cpu-time=0", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=-1", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=1.5", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=4294967296", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--open-files=15", "/w"}, wantErr: "from 16 up"},
		{args: []string{"--open-files=0", "/w"}, wantErr: "from 16 up"},
		{args: []string{"--cpu-time=2", "--cpu-time=3", "/w"}, wantErr: "given twice"},
		{args: []string{"--cpu-time=2", "/w", "/x"}, wantErr: "unknown option"},
		{args: []string{"--memory=2", "/w"}, wantErr: "unknown option"},
	} {
		lim, root, err := serveArgs(c.args)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want an error with %q", c.args, err, c.wantErr)
			}
		case err != nil || lim != c.lim || root != c.root:
			t.Errorf("%q: %+v, root %q, %v; want %+v, %q", c.args, lim, root, err, c.lim, c.root)
		}
	}
}

// FuzzServeArgs: whatever the arguments, serveArgs answers without
// panicking, and what it accepts is an absolute root and limits that are
// none or within their bounds.
func FuzzServeArgs(f *testing.F) {
	f.Add("--cpu-time=2", "--open-files=16", "/w", uint8(3))
	f.Add("/w", "", "", uint8(1))
	f.Add("--cpu-time=0x10", "/w", "", uint8(2))
	f.Fuzz(func(t *testing.T, a, b, c string, n uint8) {
		args := []string{a, b, c}[:n%4]
		lim, root, err := serveArgs(args)
		if err != nil {
			return
		}
		if !path.IsAbs(root) || root != args[len(args)-1] {
			t.Fatalf("%q: root %q", args, root)
		}
		if lim.CPUSeconds > 1<<32-1 || (lim.OpenFiles != 0 && lim.OpenFiles < boundary.MinOpenFiles) || lim.OpenFiles > 1<<32-1 {
			t.Fatalf("%q: limits %+v", args, lim)
		}
		if set := btoi(lim.CPUSeconds != 0) + btoi(lim.OpenFiles != 0); set != len(args)-1 {
			t.Fatalf("%q: %d options, %d limits set", args, len(args)-1, set)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cpuHalfUsed: never without a limit, not for a limit far above what this
// process has used, and yes once it has used half.
func TestCPUHalfUsed(t *testing.T) {
	if session.CPUHalfUsed(0) || session.CPUHalfUsed(-time.Second) {
		t.Error("retiring without a limit")
	}
	if session.CPUHalfUsed(time.Hour) {
		t.Error("retiring at a limit of an hour")
	}
	// Burn CPU until this process has used 20 ms of it (however busy the
	// machine), then a 30 ms limit is more than half used.
	for deadline := time.Now().Add(10 * time.Second); cpuUsed(t) < 20*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("could not use 20 ms of CPU in 10 s")
		}
		for x := 0; x < 1e6; x++ {
			_ = x * x
		}
	}
	if !session.CPUHalfUsed(30 * time.Millisecond) {
		t.Errorf("not retiring past half of a 30 ms limit (used %v)", cpuUsed(t))
	}
}

// cpuUsed is the CPU time this process has used.
func cpuUsed(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serve's --supervise=ROOT options: clean absolute paths, after --protect.
func TestSuperviseArgs(t *testing.T) {
	for _, c := range []struct {
		args, protect, roots, rest []string
		wantErr                    string
	}{
		{args: []string{"/w"}, rest: []string{"/w"}},
		{args: []string{"--supervise=/w", "--supervise=/w/sub", "--cpu-time=2", "/w"}, protect: []string{".bashrc"}, roots: []string{"/w", "/w/sub"}, rest: []string{"--cpu-time=2", "/w"}},
		{args: []string{"--supervise=w", "/w"}, protect: []string{".bashrc"}, wantErr: "clean absolute"},
		{args: []string{"--supervise=/w/../x", "/w"}, protect: []string{".bashrc"}, wantErr: "clean absolute"},
		{args: []string{"--supervise=/w", "/w"}, wantErr: "without --protect"},
	} {
		roots, rest, err := superviseArgs(c.args, c.protect)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want %q", c.args, err, c.wantErr)
			}
		case err != nil || strings.Join(roots, " ") != strings.Join(c.roots, " ") || strings.Join(rest, " ") != strings.Join(c.rest, " "):
			t.Errorf("%q: %q %q %v, want %q %q", c.args, roots, rest, err, c.roots, c.rest)
		}
	}
}
