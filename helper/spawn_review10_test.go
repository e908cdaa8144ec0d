package helper

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// review10Child runs, in a re-exec of the test binary whose CmdGroupFD is
// the file the parent put there, one command through forkCommand with a
// command group, and prints what came of it on stdout.
func review10Child() int {
	job := Job{Argv: []string{"sh", "-c", "echo ran"}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}, CmdGroup: true}
	job.Policy.Limits.Processes, _ = strconv.Atoi(os.Getenv("HUTCH_REVIEW10_LIMIT"))
	devnull, _ := os.Open(os.DevNull)
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	pid, st, ok := forkCommand(job, "/bin/sh", false, devnull, outW, errW)
	devnull.Close()
	outW.Close()
	errW.Close()
	var errBuf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = errBuf.ReadFrom(errR); close(done) }()
	out, _ := io.ReadAll(outR)
	<-done
	code := st.ExitCode
	if ok {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		code = ws.ExitStatus()
	}
	fmt.Printf("exit=%d\nstdout=%q\nstderr=%q\n", code, out, errBuf.String())
	return 0
}

// runReview10Child runs this test binary's review10Child with f at
// CmdGroupFD and count at CountFD, its job's process limit limit; it
// returns the child's stdout and stderr.
func runReview10Child(t *testing.T, name string, f, count *os.File, limit int) (string, string) {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^"+name+"$")
	c.Env = append(os.Environ(), "HUTCH_REVIEW10_CHILD=1", "HUTCH_REVIEW10_LIMIT="+strconv.Itoa(limit))
	c.ExtraFiles = placeGroupFiles(nil, f, count)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// A command that cannot be put into the commands' group does not run and
// says why on its stderr (README: "exit 126, saying why"). The child
// joins the group before it has moved its streams to 0-2, so the line
// went to the helper's own stderr, and the caller of the command saw a
// bare 126. Here the group's file is one that refuses writes (read-only).
func TestReview10GroupFailureSaysWhyOnCommandsStderr(t *testing.T) {
	if os.Getenv("HUTCH_REVIEW10_CHILD") != "" {
		os.Exit(review10Child())
	}
	ro, err := os.Open(os.DevNull) // write(2) on it: EBADF
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	out, helperErr := runReview10Child(t, "TestReview10GroupFailureSaysWhyOnCommandsStderr", ro, nil, 0)
	if !strings.Contains(out, "exit=126\n") || strings.Contains(out, `"ran\n"`) {
		t.Fatalf("the command ran or did not exit 126 outside its group:\n%s", out)
	}
	if !strings.Contains(out, "commands' cgroup") {
		t.Errorf("the command's stderr does not say why it did not run:\n%s\n(the helper's own stderr: %q)", out, helperErr)
	}
}

// The commands' group holds exactly the policy's process limit (README,
// Limits). The pids controller does not check pids.max when a task is
// moved in, only at fork; the child forked outside the group and then
// wrote itself in, so a session's new command started (and ran) in a
// group already at its limit. Here pids.max (and the job's limit) is 1
// and one process is in the group already: the command must not run.
func TestReview10CommandDoesNotStartInAFullGroup(t *testing.T) {
	if os.Getenv("HUTCH_REVIEW10_CHILD") != "" {
		os.Exit(review10Child())
	}
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(root, "tasks")); err != nil || os.Getuid() != 0 {
		testenv.Missing(t, "needs root and a cgroup v1 pids hierarchy")
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	dir := filepath.Join(root, "hutch-review10-"+hex.EncodeToString(id))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Missing(t, "cannot make a pids group (CI runs as root on a host with a v1 pids hierarchy): %v", err)
	}
	defer os.Remove(dir)
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("/bin/sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(holder.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tasks.Close()
	count, err := os.Open(filepath.Join(dir, "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	defer count.Close()
	out, _ := runReview10Child(t, "TestReview10CommandDoesNotStartInAFullGroup", tasks, count, 1)
	cur, _ := os.ReadFile(filepath.Join(dir, "pids.current"))
	if strings.Contains(out, `"ran\n"`) || !strings.Contains(out, "exit=126\n") {
		t.Errorf("a command started in a group already at pids.max 1 (pids.current now %s):\n%s", bytes.TrimSpace(cur), out)
	}
}

// A program that exists but whose interpreter does not (a script's #!
// line, or a binary's ELF loader) fails execve with ENOENT. spawn is
// given the file findProgram already found, yet the child called every
// all-ENOENT outcome "command not found", sending the reader after the
// wrong file. Go's ForkExec said "no such file or directory" (127 both).
func TestReview10MissingInterpreterIsNotCommandNotFound(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "tool")
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := Job{Argv: []string{"tool"}, Env: []string{"PATH=" + dir}, Dir: dir}
	code, _, errOut := spawnWait(t, job, script, "", false)
	if code != 127 || strings.Contains(errOut, "command not found") {
		t.Errorf("exit %d, stderr %q: the command exists; its interpreter is what is missing", code, errOut)
	}
}
