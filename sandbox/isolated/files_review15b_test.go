package isolated_test

// Review 15b: the file tools acting on an isolated session, attacked by a
// model that also runs commands in it. Each test failed on the code it was
// written against.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/tool"
)

type rv15b struct {
	e  *env
	sb *isolated.Sandbox
	ts *tool.Toolset
}

// newRv15b starts a session writing e.work (its start directory), with
// the tools in auto mode (the read-before-write guard on, as for every
// tier with a shell).
func newRv15b(t *testing.T, extra policy.Policy) *rv15b {
	t.Helper()
	e := newEnv(t)
	pol := e.pol.Extend(extra)
	pol.Dir = e.work
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	sb, err := isolated.New(ctx, pol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	g, err := permission.New(permission.Config{Mode: permission.Auto})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tool.New(tool.Options{Sandbox: sb, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	return &rv15b{e: e, sb: sb, ts: ts}
}

// sh runs a command of the model's in the session.
func (r *rv15b) sh(t *testing.T, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 60*time.Second)
	defer cancel()
	res, err := r.sb.Exec(ctx, sandbox.Command{Shell: script, Timeout: 50 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d %s %v", script, res.ExitCode, res.Stderr, err)
	}
}

func (r *rv15b) call(t *testing.T, name string, args any) tool.Output {
	t.Helper()
	raw, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	out, err := r.ts.Call(ctx, name, raw)
	if err != nil {
		t.Fatalf("%s(%s): no tool result: %v", name, raw, err)
	}
	return out
}

// The init answers a glob with its matches inside one control record of
// at most helper.MaxRecord (1 MiB) bytes; a larger answer fails in
// Conn.Send, whose error server.handle drops, so the host waits for an
// answer that never comes. 6000 files of 200-character names (1.2 MB of
// JSON, far below MaxGlobResults) hang glob until the caller's deadline;
// without one (hutch mcp sets none), forever. An honest "**/*.js" in a
// repository with node_modules does the same.
func TestReview15bGlobOverOneMiBAnswers(t *testing.T) {
	r := newRv15b(t, policy.Policy{})
	r.sh(t, `mkdir d && cd d && n=$(printf 'x%.0s' $(seq 200)); i=0; while [ $i -lt 6000 ]; do : > "$n$i"; i=$((i+1)); done`)
	ctx, cancel := context.WithTimeout(bg, 15*time.Second)
	defer cancel()
	files, err := r.sb.Glob(ctx, "d/*")
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("glob of 6000 long names never answered (waited 15 s): %v", err)
	case err == nil && len(files) != 6000:
		t.Fatalf("glob: %d files, want 6000", len(files))
	case err != nil && !errors.Is(err, sandbox.ErrTooLarge):
		t.Fatalf("glob: %v (want the files, or ErrTooLarge)", err)
	}
}

// The init reads a whole file into its own memory before it copies it to
// the host (server.read -> local.ReadStat), and it lives in the sandbox's
// memory cgroup. A model makes a 200 MB sparse file with one command
// (no memory, no disk) and asks read_file for a line window (which reads
// the whole file) or edit_file: the memory cgroup's OOM killer kills the
// init (dmesg: "Killed process ... (exe) ... oom_score_adj:0"), and the
// session, with any running command, is gone ("sandbox is closed: the
// sandbox's init is gone").
func TestReview15bWholeFileReadKeepsSession(t *testing.T) {
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "big", "offset": 2}},
		{"edit_file", map[string]any{"path": "big", "old_string": "x", "new_string": "y"}},
	} {
		t.Run(c.tool, func(t *testing.T) {
			r := newRv15b(t, policy.Policy{Limits: policy.Limits{Memory: 64 << 20}})
			r.sh(t, `truncate -s 200M big; echo ok > small`)
			if c.tool == "edit_file" {
				r.call(t, "read_file", map[string]any{"path": "big"}) // the guard
			}
			out := r.call(t, c.tool, c.args)
			t.Logf("%s: %.200s", c.tool, out.Text)
			if after := r.call(t, "read_file", map[string]any{"path": "small"}); after.IsError || after.Text != "ok\n" {
				t.Fatalf("after %s of a 200 MB sparse file, the session is gone: %q (the call said %.200q)", c.tool, after.Text, out.Text)
			}
		})
	}
}

// The policy's file_size limit binds the commands (RLIMIT_FSIZE) but not
// the init, which writes for write_file: a session limited to 1 MiB files
// takes a 3 MiB write_file (up to sandbox.MaxFileSize, 256 MiB).
func TestReview15bWriteFileObeysFileSizeLimit(t *testing.T) {
	r := newRv15b(t, policy.Policy{Limits: policy.Limits{FileSize: 1 << 20}})
	out := r.call(t, "write_file", map[string]any{"path": "big.txt", "content": strings.Repeat("a", 3<<20)})
	fi, err := os.Stat(filepath.Join(r.e.work, "big.txt"))
	if !out.IsError || err == nil {
		size := int64(-1)
		if err == nil {
			size = fi.Size()
		}
		t.Fatalf("write_file of 3 MiB under a 1 MiB file_size limit: %q, file on disk %d bytes", out.Text, size)
	}
}

// The guard keys on the path as named and compares only mtime and size.
// The model reads a.txt, then its command puts a link a.txt -> c.txt in
// its place, c.txt a file the session never read, of a.txt's size and
// with its mtime (touch -r): write_file a.txt passes the guard and
// overwrites c.txt.
func TestReview15bGuardSeesLinkSwap(t *testing.T) {
	r := newRv15b(t, policy.Policy{})
	r.sh(t, `printf 'hello\n' > a.txt`)
	if out := r.call(t, "read_file", map[string]any{"path": "a.txt"}); out.IsError {
		t.Fatal(out.Text)
	}
	r.sh(t, `printf 'other\n' > c.txt; touch -r a.txt c.txt; rm a.txt; ln -s c.txt a.txt`)
	out := r.call(t, "write_file", map[string]any{"path": "a.txt", "content": "clobber\n"})
	b, _ := os.ReadFile(filepath.Join(r.e.work, "c.txt"))
	if !out.IsError || string(b) != "other\n" {
		t.Fatalf("write_file a.txt after it became a link to an unread file: %q; c.txt now %q", out.Text, b)
	}
}

// Paths and glob matches cross the host/init boundary as JSON strings,
// which encoding/json turns to U+FFFD wherever the bytes are not UTF-8:
// two files "a\xff" and "a\xfe" come back from Glob as the same name
// twice (the contract says without duplicates), neither can be read, and
// Write("z\xff") creates a different file, "z\uFFFD". The local tier
// handles such names.
func TestReview15bNonUTF8Names(t *testing.T) {
	r := newRv15b(t, policy.Policy{})
	r.sh(t, `printf one > "$(printf 'a\377')"; printf two > "$(printf 'a\376')"`)
	files, err := r.sb.Glob(bg, "a*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0] == files[1] {
		t.Errorf("glob a*: %q (want two distinct names)", files)
	}
	if b, err := r.sb.Read(bg, "a\xff"); err != nil || string(b) != "one" {
		t.Errorf(`Read("a\xff"): %q %v`, b, err)
	}
	err = r.sb.Write(bg, "z\xff", []byte("w"))
	if _, serr := os.Stat(filepath.Join(r.e.work, "z\uFFFD")); serr == nil {
		t.Errorf(`Write("z\xff") (err %v) created "z\uFFFD", another file`, err)
	}
	if b, rerr := os.ReadFile(filepath.Join(r.e.work, "z\xff")); err != nil || rerr != nil || string(b) != "w" {
		t.Errorf(`Write("z\xff"): %v; the file holds %q (%v), want "w"`, err, b, rerr)
	}
}

// tool.asOp renames a path error's operation so a write_file that failed
// at its first stat says "write x: ...": the isolated tier's errors come
// back from the init as remoteError, not *fs.PathError, so the model reads
// "stat x: ..." for a write_file or edit_file.
func TestReview15bWriteErrorNamesWrite(t *testing.T) {
	r := newRv15b(t, policy.Policy{})
	r.sh(t, `ln -s /etc/passwd out`)
	for _, c := range []struct {
		name, want string
		args       map[string]any
	}{
		{"write_file", "write out", map[string]any{"path": "out", "content": "x"}},
		{"edit_file", "edit out", map[string]any{"path": "out", "old_string": "a", "new_string": "b"}},
	} {
		out := r.call(t, c.name, c.args)
		if !out.IsError || !strings.HasPrefix(out.Text, c.want) {
			t.Errorf("%s on an escaping link: %q (want it to start %q)", c.name, out.Text, c.want)
		}
	}
}
