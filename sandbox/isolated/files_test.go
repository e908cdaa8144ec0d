package isolated_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
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

type fileSession struct {
	e  *env
	sb *isolated.Sandbox
	ts *tool.Toolset
}

// newFileSession starts a session writing e.work (its start directory), with
// the tools in auto mode (the read-before-write guard on, as for every
// tier with a shell).
func newFileSession(t *testing.T, extra policy.Policy) *fileSession {
	t.Helper()
	e := newEnv(t)
	pol := e.pol.Extend(extra)
	pol.Dir = e.work
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	sb, err := isolated.New(ctx, isolated.Options{Policy: pol})
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
	return &fileSession{e: e, sb: sb, ts: ts}
}

// sh runs a command of the model's in the session.
func (r *fileSession) sh(t *testing.T, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 60*time.Second)
	defer cancel()
	res, err := r.sb.Exec(ctx, sandbox.Command{Shell: script, Timeout: 50 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d %s %v", script, res.ExitCode, res.Stderr, err)
	}
}

func (r *fileSession) call(t *testing.T, name string, args any) tool.Output {
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

// A glob whose matches are over one control record (wire.MaxRecord,
// 1 MiB: 6000 files of 200-character names) is answered, not left hanging
// until the caller's deadline (forever without one). Origin: review 15b.
func TestGlobOverOneMiBAnswers(t *testing.T) {
	r := newFileSession(t, policy.Policy{})
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

// Reading a line window of, or editing, a 200 MB sparse file does not
// kill the session: the init does not read the whole file into its
// memory, which lives in the sandbox's memory cgroup. Origin: review 15b.
func TestWholeFileReadKeepsSession(t *testing.T) {
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": "big", "offset": 2}},
		{"edit_file", map[string]any{"path": "big", "old_string": "x", "new_string": "y"}},
	} {
		t.Run(c.tool, func(t *testing.T) {
			r := newFileSession(t, policy.Policy{Limits: policy.Limits{Memory: 64 << 20}})
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

// The policy's file_size limit binds write_file too, not only the
// commands (RLIMIT_FSIZE): a session limited to 1 MiB files refuses a
// 3 MiB write. Origin: review 15b.
func TestWriteFileObeysFileSizeLimit(t *testing.T) {
	r := newFileSession(t, policy.Policy{Limits: policy.Limits{FileSize: 1 << 20}})
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

// The read-before-write guard sees a link swapped in for a file read
// (a.txt replaced by a link to c.txt of the same size and mtime):
// write_file a.txt does not overwrite c.txt. Origin: review 15b.
func TestGuardSeesLinkSwap(t *testing.T) {
	r := newFileSession(t, policy.Policy{})
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

// Names that are not UTF-8 cross the host/init boundary byte for byte:
// "a\xff" and "a\xfe" glob as two names and each reads, and Write("z\xff")
// makes "z\xff", as on the local tier. Origin: review 15b.
func TestFileToolsTakeNonUTF8Names(t *testing.T) {
	r := newFileSession(t, policy.Policy{})
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

// A write_file or edit_file that fails at its first stat says "write x:
// ...", as on the other tiers: the init's errors come back as
// *fs.PathError, whose operation the tool renames. Origin: review 15b.
func TestWriteErrorNamesWrite(t *testing.T) {
	r := newFileSession(t, policy.Policy{})
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

// A path error names the path asked, byte for byte: a failed
// Read("nope\xff") is a *fs.PathError for "nope\xff", not "nope\uFFFD".
// Origin: review 16.
func TestPathErrorNamesThePathAsked(t *testing.T) {
	e := newEnv(t)
	pol := e.pol
	pol.Dir = e.work
	sb := a2Session(t, pol)
	_, err := sb.Read(bg, "nope\xff")
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Read of a missing file: %T %v; want a *fs.PathError matching ErrNotFound", err, err)
	}
	if pe.Path != "nope\xff" {
		t.Errorf("Read(%q): the error names %q", "nope\xff", pe.Path)
	}
}

// The manage and search operations keep the policy's denied paths as
// reading does: a listing and a search leave them out, and no remove or
// rename reaches them, nor a tree that holds one.
func TestFileToolsKeepDeniedPaths(t *testing.T) {
	e := newEnv(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(e.work, "conf"), 0o755))
	must(os.WriteFile(filepath.Join(e.work, ".env"), []byte("PASSWORD=hunter2"), 0o644))
	must(os.WriteFile(filepath.Join(e.work, "conf", "key.pem"), []byte("PRIVATE-KEY hunter2"), 0o644))
	must(os.WriteFile(filepath.Join(e.work, "conf", "app.conf"), []byte("hunter2 is not here"), 0o644))
	// A link to a denied file: the search follows it to the mask over it.
	must(os.Symlink("conf/key.pem", filepath.Join(e.work, "link.pem")))
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, ".env"), filepath.Join(e.work, "conf", "key.pem")}})
	sb, err := isolated.New(bg, isolated.Options{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	ents, err := sb.List(bg, ".")
	must(err)
	for _, fi := range ents {
		if fi.Path == ".env" {
			t.Errorf("List shows the denied .env: %+v", fi)
		}
	}
	res, err := sb.Search(bg, sandbox.SearchRequest{Pattern: "hunter2", IncludeIgnored: true})
	must(err)
	for _, m := range res.Matches {
		if m.Path != "conf/app.conf" {
			t.Errorf("Search read a denied file: %+v", m)
		}
	}
	if len(res.Matches) != 1 {
		t.Errorf("Search found %+v, want conf/app.conf alone", res.Matches)
	}
	_, err = sb.Search(bg, sandbox.SearchRequest{Dir: ".env", Pattern: "x"})
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Search of a denied file: %v, want permission denied", err)
	}
	for name, op := range map[string]func() error{
		"remove the denied file":         func() error { return sb.Remove(bg, ".env", false) },
		"remove a tree holding one":      func() error { return sb.Remove(bg, "conf", true) },
		"rename the denied file":         func() error { return sb.Rename(bg, ".env", "env.txt") },
		"rename a tree holding one":      func() error { return sb.Rename(bg, "conf", "conf2") },
		"rename onto the denied file":    func() error { return sb.Rename(bg, "conf/app.conf", ".env") },
		"list below a denied path":       func() error { _, err := sb.List(bg, "conf/key.pem"); return err },
		"make a directory at the denied": func() error { return sb.Mkdir(bg, ".env") },
	} {
		if err := op(); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s: %v, want permission denied", name, err)
		}
	}
	for _, p := range []string{".env", "conf/key.pem", "conf/app.conf"} {
		if _, err := os.Stat(filepath.Join(e.work, p)); err != nil {
			t.Errorf("%s after the refused operations: %v", p, err)
		}
	}
}

// Pack and Unpack act inside the sandbox under its policy: a denied file
// is never packed, a denied or unwritable destination never written, a
// file over the policy's size limit refused.
func TestPackUnpackKeepThePolicy(t *testing.T) {
	r := newFileSession(t, policy.Policy{Limits: policy.Limits{FileSize: 1 << 20}})
	secret := filepath.Join(r.e.work, "tree", "secret")
	r.sh(t, "mkdir -p tree/sub && echo a > tree/a && echo b > tree/sub/b && echo s > tree/secret")
	sb, err := isolated.New(bg, isolated.Options{Policy: r.e.pol.Extend(policy.Policy{Deny: []string{secret}, Limits: policy.Limits{FileSize: 1 << 20}})})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var buf strings.Builder
	if err := sb.Pack(bg, "tree", time.Time{}, &buf); err != nil {
		t.Fatal(err)
	}
	names := tarNames(t, buf.String())
	if strings.Join(names, " ") != "a sub/b" {
		t.Fatalf("packed %q, want a and sub/b (secret denied)", names)
	}
	if n, err := sb.Unpack(bg, "copy", strings.NewReader(buf.String())); err != nil || n != 2 {
		t.Fatalf("Unpack: %d %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.e.work, "copy", "sub", "b")); string(b) != "b\n" {
		t.Fatalf("copy/sub/b: %q", b)
	}
	for _, c := range []struct {
		dir, name string
		size      int
		says      string
	}{
		{"tree", "secret", 1, "denied"},
		{"/usr", "x", 1, ""},
		{"big", "f", 2 << 20, "size limit"},
	} {
		_, err := sb.Unpack(bg, c.dir, strings.NewReader(tarOf(t, c.name, c.size)))
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Unpack %s/%s: %v, want a refusal naming %q", c.dir, c.name, err, c.says)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "s\n" {
		t.Errorf("the denied file became %q", b)
	}
}

// tarNames lists the names of a tar stream's entries.
func tarNames(t *testing.T, s string) []string {
	t.Helper()
	tr := tar.NewReader(strings.NewReader(s))
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

// tarOf is a tar stream of one file of size bytes.
func tarOf(t *testing.T, name string, size int) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: int64(size), Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
