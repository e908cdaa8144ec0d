package prefault

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

var sink [][]byte

// TestMain lets BenchmarkStart run this binary as a process that starts
// and exits at once ("exit"), or after allocating 1.5 MiB in small
// objects, about what hutch's own start allocates ("alloc").
func TestMain(m *testing.M) {
	switch os.Getenv("PREFAULT_TEST_CHILD") {
	case "exit":
		os.Exit(0)
	case "alloc":
		for range 3 << 10 {
			sink = append(sink, make([]byte, 512))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestPopulate(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	r := populate()
	if r.heap.hi <= r.heap.lo || r.heap.hi-r.heap.lo > heapPrefix {
		t.Errorf("heap span %#x-%#x: want a non-empty span of at most %d bytes", r.heap.lo, r.heap.hi, heapPrefix)
	}
	pc := funcPC(populate)
	if r.text.lo > pc || pc >= r.text.hi {
		t.Errorf("text span %#x-%#x does not hold populate (%#x)", r.text.lo, r.text.hi, pc)
	}
	for what, e := range map[string]errno{"heap": r.heapErr, "text": r.textErr} {
		// EINVAL: a kernel older than 5.14.
		if e != 0 && e != einval {
			t.Errorf("populating the %s: %v", what, e)
		}
	}
}

func TestFind(t *testing.T) {
	const maps = "00400000-00917000 r-xp 00000000 fe:00 10142177                           /tmp/hutch\n" +
		"00917000-00eb1000 r--p 00517000 fe:00 10142177                           /tmp/hutch\n" +
		"garbage line\n" +
		"-\n" +
		"12345\n" +
		"00f13000-02f57000 rw-p 00000000 00:00 0\n" +
		"335f19c00000-335f1a000000 rw-p 00000000 00:00 0\n" +
		"335f1a000000-335f1c000000 ---p 00000000 00:00 0\n" +
		"7ffc09ba4000-7ffc09bc5000 rw-p 00000000 00:00 0                          [stack]\n" +
		"7f2bae05f000-7f2bae061000 r-xp 00000000 00:00 0                          [vdso]"
	for _, c := range []struct {
		name       string
		probe, pc  uintptr
		heap, text span
	}{
		{"both", 0x335f19eba008, 0x48cc80, span{0x335f19c00000, 0x335f1a000000}, span{0x400000, 0x917000}},
		{"reserved", 0x335f1a000010, 0x48cc80, span{}, span{0x400000, 0x917000}},
		{"not executable", 0xf20000, 0x920000, span{0xf13000, 0x2f57000}, span{}},
		{"cut last line", 0x7ffc09ba5000, 0x7f2bae060000, span{0x7ffc09ba4000, 0x7ffc09bc5000}, span{}},
		{"none", 1, 2, span{}, span{}},
	} {
		heap, text := find([]byte(maps), c.probe, c.pc)
		if heap != c.heap || text != c.text {
			t.Errorf("%s: got heap %#x text %#x, want %#x %#x", c.name, heap, text, c.heap, c.text)
		}
	}
	if heap, text := find(nil, 1, 2); heap != (span{}) || text != (span{}) {
		t.Errorf("empty maps: got %v %v", heap, text)
	}
}

// HUTCH_NO_PREFAULT is read from the environment the process started
// with (on amd64 from /proc/self/environ, before package os exists): each
// value is tried in a fresh run of this test binary.
func TestDisabled(t *testing.T) {
	if v, ok := os.LookupEnv("HUTCH_PREFAULT_CHILD"); ok {
		fmt.Printf("disabled=%v for %q\n", disabled(), v)
		return
	}
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		c := exec.Command(os.Args[0], "-test.run=^TestDisabled$")
		c.Env = append(os.Environ(), "HUTCH_PREFAULT_CHILD="+v, "HUTCH_NO_PREFAULT="+v)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if !strings.Contains(string(out), fmt.Sprintf("disabled=%v for %q", want, v)) {
			t.Errorf("HUTCH_NO_PREFAULT=%q: want disabled %v, got %s", v, want, out)
		}
	}
}

func TestMadviseUnmapped(t *testing.T) {
	// Page 0 is never mapped: an error, not a crash.
	if e := madvise(span{0, uintptr(syscall.Getpagesize())}, madvPopulateWrite); e == 0 {
		t.Error("populating page 0 succeeded")
	}
}

// BenchmarkStart times starts of this test binary (which imports the
// package) with and without prefaulting: one that exits at once, the
// worst case, and one that allocates what hutch's start does.
func BenchmarkStart(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, child := range []string{"exit", "alloc"} {
		for _, c := range []struct{ name, off string }{{"on", "0"}, {"off", "1"}} {
			b.Run(child+"/"+c.name, func(b *testing.B) {
				env := append(os.Environ(), "PREFAULT_TEST_CHILD="+child, "HUTCH_NO_PREFAULT="+c.off)
				for b.Loop() {
					cmd := exec.Command(exe)
					cmd.Env = env
					if err := cmd.Run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
