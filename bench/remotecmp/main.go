// Command remotecmp measures the remote tier against hutch serve --listen
// on loopback, side by side with the isolated tier in this process: exec
// of `true` (warm, in a session), read of a 4 KiB file, a tree of files
// copied in and out in one call each, and the same tree one file per call
// (each file written and synced on the host, as a copy out does).
// Run it through bench/remote.sh.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/remote"
)

func main() {
	helper.Main() // the isolated tier's helpers are this program
	hutch := flag.String("hutch", "", "the hutch binary to serve with")
	n := flag.Int("n", 300, "runs of each timed operation")
	files := flag.Int("files", 1000, "files in the copied tree")
	size := flag.Int("size", 10<<10, "bytes per file")
	copies := flag.Int("copies", 5, "runs of each bulk copy (the median is shown)")
	flag.Parse()
	if err := run(*hutch, *n, *files, *size, *copies); err != nil {
		fmt.Fprintln(os.Stderr, "remotecmp:", err)
		os.Exit(1)
	}
}

func run(hutch string, n, files, size, copies int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "remotecmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	srv := exec.Command(hutch, "serve", "--listen", "127.0.0.1:0", "--token-file", filepath.Join(tmp, "token"), "--write", work)
	stderr, err := srv.StderrPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	url, err := listening(stderr)
	if err != nil {
		return err
	}
	token, err := os.ReadFile(filepath.Join(tmp, "token"))
	if err != nil {
		return err
	}
	rsb, err := remote.New(ctx, remote.Server{URL: url, Token: strings.TrimSpace(string(token))}, remote.Options{})
	if err != nil {
		return err
	}
	defer rsb.Close()
	local := filepath.Join(tmp, "local")
	if err := os.Mkdir(local, 0o755); err != nil {
		return err
	}
	isb, err := isolated.New(ctx, isolated.Options{Policy: policy.Default().Extend(policy.Policy{Write: []string{local}})})
	if err != nil {
		return err
	}
	defer isb.Close()

	true_ := sandbox.Command{Args: []string{"true"}, Timeout: 30 * time.Second}
	execIn := func(sb sandbox.Sandbox) func() error {
		return func() error { _, err := sb.Exec(ctx, true_); return err }
	}
	iso, err := p50(n, execIn(isb))
	if err != nil {
		return err
	}
	rem, err := p50(n, execIn(rsb))
	if err != nil {
		return err
	}
	fmt.Printf("exec true (warm session)   isolated %8v   remote %8v   remote/isolated %.2fx (target <= 2x)\n", iso, rem, float64(rem)/float64(iso))

	page := make([]byte, 4096)
	if err := rsb.Write(ctx, "page", page); err != nil {
		return err
	}
	if err := isb.Write(ctx, "page", page); err != nil {
		return err
	}
	readOf := func(sb sandbox.Sandbox) func() error {
		return func() error { _, err := sb.Read(ctx, "page"); return err }
	}
	iso, err = p50(n, readOf(isb))
	if err != nil {
		return err
	}
	rem, err = p50(n, readOf(rsb))
	if err != nil {
		return err
	}
	fmt.Printf("read 4 KiB                 isolated %8v   remote %8v   (target: remote p50 <= 1ms)\n", iso, rem)

	src := filepath.Join(tmp, "src")
	names, err := makeTree(src, files, size)
	if err != nil {
		return err
	}
	// The tree's own writes reach the disk first: a copy in never shares
	// the journal with the writeback of its source.
	syscall.Sync()
	in, err := median(copies, func(i int) error {
		if c, err := rsb.CopyIn(ctx, src, fmt.Sprintf("tree%d", i)); err != nil || c != files {
			return fmt.Errorf("copy in: %d files, %v", c, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	archive, err := tarOf(src, names)
	if err != nil {
		return err
	}
	isoIn, err := median(copies, func(i int) error {
		_, err := sandbox.Sandbox(isb).(sandbox.Packer).Unpack(ctx, filepath.Join(local, fmt.Sprintf("tree%d", i)), bytes.NewReader(archive))
		return err
	})
	if err != nil {
		return err
	}
	out, err := median(copies, func(i int) error {
		if c, err := rsb.CopyOut(ctx, fmt.Sprintf("tree%d", i), filepath.Join(tmp, fmt.Sprintf("out%d", i)), time.Time{}); err != nil || c != files {
			return fmt.Errorf("copy out: %d files, %v", c, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	begin := time.Now()
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := rsb.Write(ctx, "each/"+name, data); err != nil {
			return err
		}
	}
	eachIn := time.Since(begin)
	begin = time.Now()
	for _, name := range names {
		data, err := rsb.Read(ctx, "each/"+name)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, "eachout", name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := writeSynced(dst, data); err != nil {
			return err
		}
	}
	eachOut := time.Since(begin)
	var outs []time.Duration
	floorIn, err := median(copies, func(i int) error {
		_, out, err := floor(filepath.Join(tmp, fmt.Sprintf("floor%d", i)), src, names)
		outs = append(outs, out)
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(outs)
	floorOut := outs[len(outs)/2]
	mb := float64(files*size) / (1 << 20)
	fmt.Printf("tree of %d files, %.1f MiB  copy in %8v   copy out %8v   (target < 500ms each way)\n", files, mb, in.Round(time.Millisecond), out.Round(time.Millisecond))
	fmt.Printf("  isolated tier, in process in %8v   (its Unpack of the same tree from memory): remote/isolated %.1fx\n", isoIn.Round(time.Millisecond), float64(in)/float64(isoIn))
	fmt.Printf("  one file per call         in %8v   out %8v   per-call/bulk %.1fx in, %.1fx out\n", eachIn.Round(time.Millisecond), eachOut.Round(time.Millisecond),
		float64(eachIn)/float64(in), float64(eachOut)/float64(out))
	fmt.Printf("  this disk, no sandbox     in %8v   out %8v   (in: write+fsync; out: read, write+fsync; 32 at once): bulk/floor %.1fx in, %.1fx out\n",
		floorIn.Round(time.Millisecond), floorOut.Round(time.Millisecond), float64(in)/float64(floorIn), float64(out)/float64(floorOut))
	return nil
}

// floor is what the tree costs on this disk with no sandbox and no
// network, 32 files at once: in, each file written and synced (as Write
// does) into dir; out, each read back and written and synced into a
// second directory (a copy out writes every file on this side too).
func floor(dir, src string, names []string) (in, out time.Duration, err error) {
	data, err := os.ReadFile(filepath.Join(src, names[0]))
	if err != nil {
		return 0, 0, err
	}
	each := func(fn func(name string) error) (time.Duration, error) {
		begin := time.Now()
		errs := make(chan error, 32)
		for w := range 32 {
			go func() {
				var first error
				for i := w; i < len(names); i += 32 {
					if err := fn(names[i]); err != nil && first == nil {
						first = err
					}
				}
				errs <- first
			}()
		}
		var first error
		for range 32 {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return time.Since(begin), first
	}
	back := dir + "-back"
	for _, name := range names {
		for _, d := range []string{dir, back} {
			if err := os.MkdirAll(filepath.Join(d, filepath.Dir(name)), 0o755); err != nil {
				return 0, 0, err
			}
		}
	}
	if in, err = each(func(name string) error { return writeSynced(filepath.Join(dir, name), data) }); err != nil {
		return 0, 0, err
	}
	out, err = each(func(name string) error {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		return writeSynced(filepath.Join(back, name), b)
	})
	return in, out, err
}

// writeSynced writes data to a new file at path and syncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func listening(stderr interface{ Read([]byte) (int, error) }) (string, error) {
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`on (http://\S+)/`)
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return u, nil
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("hutch serve did not say where it listens")
	}
}

// tarOf is the tar archive of the files names below dir.
func tarOf(dir string, names []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o644}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}

// median runs fn(0..n-1) in turn and returns the median time of one.
func median(n int, fn func(i int) error) (time.Duration, error) {
	ds := make([]time.Duration, n)
	for i := range ds {
		begin := time.Now()
		if err := fn(i); err != nil {
			return 0, err
		}
		ds[i] = time.Since(begin)
	}
	slices.Sort(ds)
	return ds[n/2], nil
}

// p50 runs fn n times (after a few warm-ups) and returns the median.
func p50(n int, fn func() error) (time.Duration, error) {
	for range 5 {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	d, err := median(n, func(int) error { return fn() })
	return d.Round(time.Microsecond), err
}

func makeTree(dir string, files, size int) ([]string, error) {
	names := make([]string, files)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	for i := range files {
		names[i] = filepath.Join(fmt.Sprintf("d%02d", i%32), fmt.Sprintf("f%04d", i))
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(names[i])), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, names[i]), data, 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}
