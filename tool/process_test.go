package tool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/tool"
)

// TestShellDirAndStdin: dir starts the command inside the root (never
// outside it); stdin is its input, and without it the input is empty.
func TestShellDirAndStdin(t *testing.T) {
	sb, dir := localSB(t)
	must(t, os.MkdirAll(filepath.Join(dir, "sub/deeper"), 0o755))
	must(t, os.Symlink("/tmp", filepath.Join(dir, "out")))
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	shell := func(args map[string]any) tool.ShellResult {
		t.Helper()
		out := call(t, ts, "shell", args)
		wantOK(t, out)
		return out.Data.(tool.ShellResult)
	}
	if r := shell(map[string]any{"command": "pwd", "dir": "sub/deeper"}); strings.TrimSpace(r.Stdout) != filepath.Join(dir, "sub/deeper") {
		t.Errorf("pwd in sub/deeper = %q", r.Stdout)
	}
	if r := shell(map[string]any{"command": "cat", "stdin": "line one\nline two\n"}); r.Stdout != "line one\nline two\n" {
		t.Errorf("cat of stdin = %q", r.Stdout)
	}
	if r := shell(map[string]any{"command": "cat; echo end"}); r.Stdout != "end\n" || r.TimedOut {
		t.Errorf("cat without stdin = %+v: want empty input, at once", r)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "pwd", "dir": "../"}, "escapes"},
		{map[string]any{"command": "pwd", "dir": "out"}, "escapes"},
		{map[string]any{"command": "pwd", "dir": "missing"}, "no such file"},
		{map[string]any{"command": "pwd", "dir": "a\x00"}, "NUL"},
		{map[string]any{"command": "cat", "stdin": strings.Repeat("x", tool.MaxShellStdin+1)}, "stdin is"},
		{map[string]any{"command": "cat", "stdin": "x", "background": true}, "process_input"},
	} {
		wantErrText(t, call(t, ts, "shell", c.args), c.want)
	}
}

// output reads a background process's output from since until it ended
// (or the deadline), and returns it with the last status.
func output(t *testing.T, ts *tool.Toolset, id string) (string, tool.ProcessOutput) {
	t.Helper()
	var b strings.Builder
	var since int64
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := call(t, ts, "process_output", map[string]any{"id": id, "since": since, "wait_ms": 2000})
		wantOK(t, out)
		po := out.Data.(tool.ProcessOutput)
		b.WriteString(po.Output)
		since = po.Next
		if (!po.Running && !po.More) || time.Now().After(deadline) {
			return b.String(), po
		}
	}
}

func startBackground(t *testing.T, ts *tool.Toolset, command string) string {
	t.Helper()
	out := call(t, ts, "shell", map[string]any{"command": command, "background": true})
	wantOK(t, out)
	return out.Data.(tool.BackgroundStarted).ID
}

// TestBackgroundProcesses: a background command answers at once; its
// output is read on from an offset, its input written, its end reported;
// it can be killed; a session has at most MaxBackground running.
func TestBackgroundProcesses(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	t.Cleanup(func() { _ = ts.Close() })

	begin := time.Now()
	id := startBackground(t, ts, "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.2; done; exit 3")
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("a background start took %v: it must answer at once", d)
	}
	got, st := output(t, ts, id)
	for _, w := range []string{"out1", "err2", "out3"} {
		if !strings.Contains(got, w) {
			t.Errorf("output %q lacks %q", got, w)
		}
	}
	if st.Running || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Errorf("status after the end: %+v, want ended with exit code 3", st.ProcessStatus)
	}

	// Input: a cat echoes what it is given, and ends at eof.
	cat := startBackground(t, ts, "cat")
	wantOK(t, call(t, ts, "process_input", map[string]any{"id": cat, "data": "hello\n"}))
	wantOK(t, call(t, ts, "process_input", map[string]any{"id": cat, "data": "bye\n", "eof": true}))
	if got, st := output(t, ts, cat); got != "hello\nbye\n" || st.Running || *st.ExitCode != 0 {
		t.Errorf("cat: output %q, status %+v", got, st.ProcessStatus)
	}
	wantErrText(t, call(t, ts, "process_input", map[string]any{"id": cat, "data": "late"}), "does not take input")

	// Kill: the process and what it started end.
	marker := uniqueSleep() // in the command lines of the shell and of both sleeps
	sleeper := startBackground(t, ts, "sleep "+marker+" & sleep "+marker+"; : ")
	out := call(t, ts, "process_kill", map[string]any{"id": sleeper})
	wantOK(t, out)
	if st := out.Data.(tool.ProcessStatus); st.Running {
		t.Errorf("after process_kill: %+v", st)
	}
	if left := sandboxtest.Survivors(marker, 5*time.Second); len(left) > 0 {
		t.Errorf("left running after process_kill: %v", left)
	}

	// The bound.
	var ids []string
	for range tool.MaxBackground {
		ids = append(ids, startBackground(t, ts, "sleep 1000"))
	}
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "true", "background": true}), "background processes are running")
	list := call(t, ts, "process_list", map[string]any{})
	wantOK(t, list)
	if n := len(list.Data.(tool.ProcessList).Processes); n != tool.MaxBackground+3 {
		t.Errorf("process_list shows %d processes, want %d", n, tool.MaxBackground+3)
	}
	for _, id := range ids {
		wantOK(t, call(t, ts, "process_kill", map[string]any{"id": id}))
	}
	wantOK(t, call(t, ts, "shell", map[string]any{"command": "true", "background": true}))
	wantErrText(t, call(t, ts, "process_output", map[string]any{"id": "p999"}), "no background process")
}

// TestBackgroundOutputBounded: a flood keeps only the last MaxProcessLog
// bytes in memory, and says how much was dropped.
func TestBackgroundOutputBounded(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	t.Cleanup(func() { _ = ts.Close() })
	id := startBackground(t, ts, "head -c 3000000 /dev/zero | tr '\\0' x; echo END")
	var st tool.ProcessOutput
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		st = call(t, ts, "process_output", map[string]any{"id": id, "wait_ms": 1000}).Data.(tool.ProcessOutput)
		if !st.Running {
			break
		}
	}
	out := call(t, ts, "process_output", map[string]any{"id": id, "since": 0})
	wantOK(t, out)
	po := out.Data.(tool.ProcessOutput)
	if po.OutputBytes != 3000004 || po.Dropped != 3000004-tool.MaxProcessLog || len(po.Output) != tool.MaxProcessChunk || !po.More {
		t.Errorf("flood: %d bytes printed, %d dropped, %d shown, more %v", po.OutputBytes, po.Dropped, len(po.Output), po.More)
	}
	tail := call(t, ts, "process_output", map[string]any{"id": id, "since": po.OutputBytes - 4}).Data.(tool.ProcessOutput)
	if tail.Output != "END\n" {
		t.Errorf("the last bytes = %q", tail.Output)
	}
}

// uniqueSleep is a sleep duration (a thousand seconds and some) no other
// process has in its command line: a marker that background children
// carry too.
func uniqueSleep() string {
	return fmt.Sprintf("1000.%09d", time.Now().UnixNano()%1_000_000_000)
}

// TestBackgroundEndsWithSession: Close kills every background process of
// the session, with what it started, and later starts are refused.
func TestBackgroundEndsWithSession(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	marker := uniqueSleep()
	startBackground(t, ts, "sleep "+marker+" & sleep "+marker)
	startBackground(t, ts, "trap '' TERM; sleep "+marker)
	if len(sandboxtest.Processes(marker)) == 0 {
		time.Sleep(200 * time.Millisecond)
	}
	must(t, ts.Close())
	if left := sandboxtest.Survivors(marker, 5*time.Second); len(left) > 0 {
		t.Errorf("left running after the session closed: %v", left)
	}
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "true", "background": true}), "closing")
}
