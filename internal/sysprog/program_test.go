//go:build linux

package sysprog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

// The interpreter's rules, on harmless system calls run in this process.
func TestProgram(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(b *builder, path string) (uint8, *op) {
		s := b.slot()
		o := b.call("opening "+path, unix.SYS_OPENAT, cwd, b.str(path), unix.O_PATH|unix.O_CLOEXEC)
		o.out = s
		return s, o
	}
	for _, c := range []struct {
		name string
		make func(b *builder)
		want string // "" for success, else what the error must say
	}{
		{"a missing path fails and is named", func(b *builder) {
			open(b, filepath.Join(dir, "missing"))
		}, "opening " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"a tolerated errno skips what depends on the call", func(b *builder) {
			start := b.mark()
			s, _ := open(b, filepath.Join(dir, "missing"))
			b.call("must be skipped", unix.SYS_CLOSE, 9999)
			b.close(s)
			b.skipTo(start, unix.ENOENT)
		}, ""},
		{"a slot feeds a later call", func(b *builder) {
			s, _ := open(b, file)
			b.add("checking the type", op{kind: opType, in: [6]uint8{s}, args: [6]uintptr{unix.S_IFREG}})
			b.close(s)
		}, ""},
		{"a type that changed fails", func(b *builder) {
			s, _ := open(b, file)
			b.add("checking "+file, op{kind: opType, in: [6]uint8{s}, args: [6]uintptr{unix.S_IFDIR}})
		}, "checking " + file + ": the path changed type"},
		{"a type check with a skip branches", func(b *builder) {
			s, _ := open(b, file)
			at := b.mark()
			b.add("is it a directory", op{kind: opType, in: [6]uint8{s}, args: [6]uintptr{unix.S_IFDIR}})
			b.call("must be skipped", unix.SYS_CLOSE, 9999)
			b.skipTo(at)
			b.close(s)
		}, ""},
		{"a jump skips", func(b *builder) {
			at := b.mark()
			b.add("jump", op{kind: opJump})
			b.call("must be skipped", unix.SYS_CLOSE, 9999)
			b.skipTo(at)
		}, ""},
		{"an expectation that fails", func(b *builder) {
			s := b.slot()
			b.call("getting the pid", unix.SYS_GETPID).out = s
			b.add("expecting pid 0", op{kind: opExpect, in: [6]uint8{s}, args: [6]uintptr{0}})
		}, "expecting pid 0: broken pipe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBuilder()
			c.make(b)
			p, err := b.build()
			if err != nil {
				t.Fatal(err)
			}
			err = p.exec()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("want success, got %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("want an error saying %q, got %v", c.want, err)
			}
		})
	}
}

// A sandbox's PID 1 goes no further when the host died before its death
// signal was set: the host's end of a pipe is gone.
func TestHostAlive(t *testing.T) {
	for _, hostHolds := range []bool{true, false} {
		var p2 [2]int
		if err := unix.Pipe2(p2[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		r, w := p2[0], p2[1]
		host := -1 // the host's copy of w, when it lives
		if hostHolds {
			var err error
			if host, err = unix.Dup(w); err != nil {
				t.Fatal(err)
			}
		}
		b := newBuilder()
		b.hostAlive(uintptr(r), uintptr(w))
		p, err := b.build()
		if err != nil {
			t.Fatal(err)
		}
		err = p.exec() // closes w, as the child closes its copy
		switch {
		case hostHolds && err != nil:
			t.Errorf("host alive: %v", err)
		case !hostHolds && (err == nil || !strings.Contains(err.Error(), "checking the host is alive")):
			t.Errorf("host gone: %v", err)
		}
		unix.Close(r)
		if host >= 0 {
			unix.Close(host)
		}
	}
}

// Slots are reused once closed; a program that would need more than there
// are, or a string with a NUL, does not build.
func TestProgramBuildLimits(t *testing.T) {
	b := newBuilder()
	for range 10 * slotCount {
		s := b.slot()
		b.close(s)
	}
	if _, err := b.build(); err != nil {
		t.Fatalf("closed slots are not reused: %v", err)
	}
	// A preset slot is never one an earlier op wrote to.
	b = newBuilder()
	freed := b.slot()
	b.close(freed)
	if p := b.preset(7); p == freed || b.p.slots[p] != 7 {
		t.Fatalf("preset slot %d reuses freed slot %d", p, freed)
	}
	b = newBuilder()
	for range slotCount {
		b.slot()
	}
	if _, err := b.build(); err == nil || !strings.Contains(err.Error(), "descriptors") {
		t.Fatalf("too many open slots: %v", err)
	}
	b = newBuilder()
	b.str("/etc\x00/shadow")
	if _, err := b.build(); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("a NUL in a path: %v", err)
	}
	if _, err := rootProgram(policy.Policy{Read: []string{"/usr\x00/x"}}, wire.Quotas{}, nil, false); err == nil {
		t.Fatal("a policy path with a NUL built a root")
	}
}

// A policy path through a symbolic link is refused by name, a missing one
// is left out, and a link as the last element is recreated.
func TestRootProgramHostPaths(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := rootProgram(policy.Policy{Read: []string{filepath.Join(dir, "link", "x")}}, wire.Quotas{}, nil, false); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a path through a link: %v", err)
	}
	binds, _, err := hostBinds(policy.Policy{Read: []string{filepath.Join(dir, "missing"), filepath.Join(dir, "link"), real}})
	if err != nil {
		t.Fatal(err)
	}
	if len(binds) != 2 || binds[0].kind != unix.S_IFLNK || binds[0].link != real || binds[1].kind != unix.S_IFDIR {
		t.Errorf("binds: %+v", binds)
	}
}
