package helper

import (
	"path"
	"strings"
	"testing"
	"time"
)

func TestServeArgs(t *testing.T) {
	for _, c := range []struct {
		args    []string
		cpu     uint64
		root    string
		wantErr string
	}{
		{args: []string{"/w"}, root: "/w"},
		{args: []string{"--cpu-time=2", "/w"}, cpu: 2, root: "/w"},
		{args: []string{"--cpu-time=4294967295", "/w"}, cpu: 4294967295, root: "/w"},
		{args: nil, wantErr: "want one root"},
		{args: []string{""}, wantErr: "not an absolute path"},
		{args: []string{"w"}, wantErr: "not an absolute path"},
		{args: []string{"/w", "/x"}, wantErr: "unknown option"},
		{args: []string{"--cpu-time=2"}, wantErr: "not an absolute path"},
		{args: []string{"--cpu-time=0", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=-1", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=1.5", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=4294967296", "/w"}, wantErr: "from 1 up"},
		{args: []string{"--cpu-time=2", "/w", "/x"}, wantErr: "want one root"},
		{args: []string{"--memory=2", "/w"}, wantErr: "unknown option"},
	} {
		cpu, root, err := serveArgs(c.args)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want an error with %q", c.args, err, c.wantErr)
			}
		case err != nil || cpu != c.cpu || root != c.root:
			t.Errorf("%q: cpu %d, root %q, %v; want %d, %q", c.args, cpu, root, err, c.cpu, c.root)
		}
	}
}

// FuzzServeArgs: whatever the arguments, serveArgs answers without
// panicking, and what it accepts is a root and a limit of 0 (none) or a
// whole number of seconds it was given.
func FuzzServeArgs(f *testing.F) {
	f.Add("--cpu-time=2", "/w", true)
	f.Add("/w", "", false)
	f.Add("--cpu-time=0x10", "/w", true)
	f.Fuzz(func(t *testing.T, a, b string, two bool) {
		args := []string{a}
		if two {
			args = append(args, b)
		}
		cpu, root, err := serveArgs(args)
		if err != nil {
			return
		}
		if root != args[len(args)-1] {
			t.Fatalf("%q: root %q", args, root)
		}
		if !path.IsAbs(root) || two != (cpu != 0) {
			t.Fatalf("%q: cpu %d, root %q", args, cpu, root)
		}
		if v, ok := strings.CutPrefix(a, "--cpu-time="); two && (!ok || v == "" || strings.Trim(v, "0123456789") != "") {
			t.Fatalf("%q: cpu %d from %q", args, cpu, a)
		}
	})
}

// cpuHalfUsed: never without a limit, not for a limit far above what this
// process has used, and yes once it has used half.
func TestCPUHalfUsed(t *testing.T) {
	if cpuHalfUsed(0) || cpuHalfUsed(-time.Second) {
		t.Error("retiring without a limit")
	}
	if cpuHalfUsed(time.Hour) {
		t.Error("retiring at a limit of an hour")
	}
	// Burn 20 ms of CPU, then a 30 ms limit is more than half used.
	start := time.Now()
	for x := 0; time.Since(start) < 40*time.Millisecond; x++ {
		_ = x * x
	}
	if !cpuHalfUsed(30 * time.Millisecond) {
		t.Error("not retiring past half of a 30 ms limit")
	}
}
