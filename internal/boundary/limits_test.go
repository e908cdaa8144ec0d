package boundary

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLimitCounts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1mem := write("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
	v2mem := write("memory.events", "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n")
	pids := write("pids.events", "max 5\n")
	odd := write("odd", "oom_kill\nmax x\nmaxx 9\n oom_kill 4\n")
	for _, c := range []struct {
		name  string
		files CgroupFiles
		want  LimitCounts
	}{
		{"v1", CgroupFiles{Memory: v1mem, Pids: pids}, LimitCounts{3, 5}},
		{"v2: oom_kill, not max or oom", CgroupFiles{Memory: v2mem, Pids: pids}, LimitCounts{2, 5}},
		{"none", CgroupFiles{}, LimitCounts{}},
		{"missing files", CgroupFiles{Memory: filepath.Join(dir, "no"), Pids: filepath.Join(dir, "nope")}, LimitCounts{}},
		{"malformed lines count nothing", CgroupFiles{Memory: odd, Pids: odd}, LimitCounts{}},
	} {
		open := c.files.Open()
		if got := open.Counts(); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		open.Close()
	}
	for _, c := range []struct {
		before, now LimitCounts
		want        string
	}{
		{LimitCounts{1, 1}, LimitCounts{1, 1}, ""},
		{LimitCounts{1, 1}, LimitCounts{2, 1}, "memory"},
		{LimitCounts{1, 1}, LimitCounts{1, 4}, "pids"},
		{LimitCounts{1, 1}, LimitCounts{2, 4}, "memory"},
		{LimitCounts{5, 5}, LimitCounts{0, 0}, ""}, // a counter that went back (files gone) is no hit
	} {
		if got := c.now.Since(c.before); got != c.want {
			t.Errorf("%+v since %+v: %q, want %q", c.now, c.before, got, c.want)
		}
	}
}

func TestRlimitHit(t *testing.T) {
	for _, c := range []struct {
		code       int
		cpu, fsize bool
		want       string
	}{
		{152, true, true, "cpu_time"},
		{152, false, true, ""}, // no such limit was set: a SIGXCPU from elsewhere
		{153, true, true, "file_size"},
		{153, true, false, ""},
		{137, true, true, ""},
		{0, true, true, ""},
		{24, true, true, ""}, // exit status 24, not a signal
	} {
		if got := RlimitHit(c.code, c.cpu, c.fsize); got != c.want {
			t.Errorf("RlimitHit(%d, %v, %v) = %q, want %q", c.code, c.cpu, c.fsize, got, c.want)
		}
	}
}

// Counters held open read their files from the start at every Counts: a
// counter that moved between two commands is seen, not the first read's.
// Plain files stand in for the kernel's here; that a held cgroup file is
// made anew at each read from offset 0, the isolated tier's TestLimits
// shows (a session's limit hits are read through held counters).
func TestOpenCountersReadAnewEachTime(t *testing.T) {
	dir := t.TempDir()
	mem, pids := filepath.Join(dir, "memory.events"), filepath.Join(dir, "pids.events")
	set := func(oom, max string) {
		t.Helper()
		for p, text := range map[string]string{mem: "oom 0\noom_kill " + oom + "\n", pids: "max " + max + "\n"} {
			// In place, as the kernel's files change: the same file.
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(text); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	set("1", "2")
	c := CgroupFiles{Memory: mem, Pids: pids}.Open()
	defer c.Close()
	before := c.Counts()
	if before != (LimitCounts{1, 2}) {
		t.Fatalf("first read: %+v", before)
	}
	set("1", "12")
	if got := c.Counts(); got != (LimitCounts{1, 12}) || got.Since(before) != "pids" {
		t.Errorf("after the pids counter moved: %+v (%q)", got, got.Since(before))
	}
	var none *Counters
	if got := none.Counts(); got != (LimitCounts{}) {
		t.Errorf("nil Counters: %+v", got)
	}
	none.Close()
}
