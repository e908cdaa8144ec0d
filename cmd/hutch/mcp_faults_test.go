package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// mcpChild is "hutch mcp" running in a child process (this test binary,
// see hutchCommand), with the client's ends of its stdio.
type mcpChild struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr lockedBuffer
	exited chan int // its exit status, once it has exited
}

func startMCP(t *testing.T, args ...string) *mcpChild {
	t.Helper()
	return startChild(t, hutchCommand(append([]string{"mcp"}, args...)...))
}

// startChild starts cmd, a hutch mcp, with the client's ends of its
// stdio; it is killed when t ends.
func startChild(t *testing.T, cmd *exec.Cmd) *mcpChild {
	t.Helper()
	c := &mcpChild{cmd: cmd, exited: make(chan int, 1)}
	c.cmd.Stderr = &c.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.out = bufio.NewReader(out)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait()
		c.exited <- c.cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); c.in.Close() })
	return c
}

// send writes lines to the child's stdin, in the background (the child's
// replies are read meanwhile).
func (c *mcpChild) send(lines ...string) {
	go io.WriteString(c.in, strings.Join(lines, "\n")+"\n")
}

// read returns the next message from the child.
func (c *mcpChild) read(t *testing.T) map[string]any {
	t.Helper()
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading a reply: %v (stderr %q)", err, c.stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return m
}

// wait returns the child's exit status, failing t when it has not exited
// within d.
func (c *mcpChild) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case code := <-c.exited:
		return code
	case <-time.After(d):
		t.Fatalf("hutch mcp did not exit within %v (stderr %q)", d, c.stderr.String())
		return 0
	}
}

const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// The real server, with the real 16 MiB limit: a line that is not JSON
// and a line a few MiB over the limit each get an error reply, and the
// pings after them are answered.
func TestMCPStdioMalformedLines(t *testing.T) {
	c := startMCP(t, "--tier", "virtual")
	c.send(mcpInit)
	c.read(t)
	c.send(`{"jsonrpc":"2.0","id":2,"method":`, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if m := c.read(t); m["error"].(map[string]any)["code"] != float64(-32700) || m["id"] != nil {
		t.Errorf("truncated JSON: %v", m)
	}
	if m := c.read(t); m["id"] != float64(3) || m["result"] == nil {
		t.Errorf("ping: %v", m)
	}
	go func() {
		pad := strings.Repeat("x", 1<<20)
		for range mcpserver.MaxMessage>>20 + 3 {
			if _, err := io.WriteString(c.in, pad); err != nil {
				return
			}
		}
		io.WriteString(c.in, "\n"+`{"jsonrpc":"2.0","id":4,"method":"ping"}`+"\n")
	}()
	m := c.read(t)
	if e, _ := m["error"].(map[string]any); e == nil || e["code"] != float64(-32600) || !strings.Contains(e["message"].(string), fmt.Sprint(mcpserver.MaxMessage)) {
		t.Errorf("a line over the limit: %v", m)
	}
	if m := c.read(t); m["id"] != float64(4) || m["result"] == nil {
		t.Errorf("ping after the long line: %v", m)
	}
	c.in.Close()
	if code := c.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d at EOF, stderr %q", code, c.stderr.String())
	}
}

// SIGTERM or SIGINT stops "hutch mcp" cleanly: exit 0, one line saying
// why, after the running command was killed. A client closing stdin (sig
// 0 here) ends it the same way, without the line.
func TestMCPStopsOnSignal(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name  string
		sig   syscall.Signal // 0: close stdin
		args  []string
		shell bool // a shell call runs when the signal comes
	}{
		{"virtual SIGTERM", syscall.SIGTERM, []string{"--tier", "virtual"}, false},
		{"virtual SIGINT", syscall.SIGINT, []string{"--tier", "virtual"}, false},
		{"local SIGTERM during a shell call", syscall.SIGTERM, []string{"--tier", "local", "--root", dir, "--mode", "auto"}, true},
		{"isolated SIGTERM during a shell call", syscall.SIGTERM, []string{"--tier", "isolated", "--root", dir, "--mode", "auto"}, true},
		{"local EOF during a shell call", 0, []string{"--tier", "local", "--root", dir, "--mode", "auto"}, true},
		{"http SIGTERM", syscall.SIGTERM, []string{"--tier", "virtual", "--http", "127.0.0.1:0", "--http-no-auth"}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startMCP(t, tc.args...)
			pid := 0
			if tc.args[len(tc.args)-1] != "--http-no-auth" {
				c.send(mcpInit)
				c.read(t)
			} else {
				for deadline := time.Now().Add(10 * time.Second); !strings.Contains(c.stderr.String(), "serving MCP"); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("hutch mcp --http did not start: %q", c.stderr.String())
					}
				}
			}
			if tc.shell {
				marker := fmt.Sprintf("1000.%d%d", time.Now().UnixNano()%1000000, i)
				c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
					`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"sleep `+marker+`; echo done"}}}`)
				pid = waitForProcess(t, marker)
			}
			want, stops := "hutch: mcp: stopped by "+map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[tc.sig]+"\n", 1
			if tc.sig == 0 {
				c.in.Close()
				want, stops = "", 0
			} else if err := c.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code := c.wait(t, 10*time.Second)
			if errs := c.stderr.String(); code != 0 || !strings.HasSuffix(errs, want) || strings.Count(errs, "stopped") != stops {
				t.Errorf("exit %d, stderr %q; want 0 and %q", code, errs, want)
			}
			if pid != 0 && testenv.Alive(pid) {
				t.Errorf("the shell call's command (pid %d) outlived hutch mcp", pid)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer a child's output goes to while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	staticOnce sync.Once
	staticPath string
	staticErr  error
)

// staticHutch builds hutch without cgo, once: the binary the container
// tier's helper path needs (the helper is hutch itself, and a busybox
// image has no C library), which the test binary may not be.
func staticHutch(t *testing.T) string {
	t.Helper()
	staticOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hutch-static-")
		if err != nil {
			staticErr = err
			return
		}
		staticPath = dir + "/hutch"
		c := exec.Command("go", "build", "-o", staticPath, ".")
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			staticErr = fmt.Errorf("building a static hutch: %v: %s", err, out)
		}
	})
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	return staticPath
}

// needRuntime ends t (testenv.Missing) unless the runtime's program has
// the test image.
func needRuntime(t *testing.T, runtime, image string) {
	t.Helper()
	if out, err := exec.Command(runtime, "image", "inspect", image).CombinedOutput(); err != nil {
		testenv.Missing(t, "no %s with %s (run scripts/docker-up.sh and scripts/podman-up.sh): %v %s", runtime, image, err, out)
	}
}

// containersNamed lists the containers, running or not, that carry
// hutch's identity label name.
func containersNamed(t *testing.T, runtime, name string) []string {
	t.Helper()
	out, err := exec.Command(runtime, "ps", "-a", "-q", "--filter", "label=hutch.sandbox.id="+name).CombinedOutput()
	if err != nil {
		t.Fatalf("%s ps: %v %s", runtime, err, out)
	}
	return strings.Fields(string(out))
}

// A hutch killed with SIGKILL takes its container along: within seconds
// the container is gone, on docker and podman, through the helper and
// through the runtime's exec, under hutch mcp during a shell call and
// under hutch run. A Reconnect container stays, as it is meant to.
func TestContainerGoesAwayWhenHutchIsKilled(t *testing.T) {
	image := envOrDefault("HUTCH_TEST_IMAGE", "hutch-test-busybox:latest")
	cases := []struct {
		name    string
		runtime string
		args    []string // after the tier's flags
		mcp     bool
		stays   bool // a Reconnect container is meant to outlive hutch
	}{
		{"mcp docker helper", "docker", nil, true, false},
		{"mcp docker exec", "docker", []string{"--no-helper"}, true, false},
		{"mcp podman helper", "podman", []string{"--runtime", "podman"}, true, false},
		{"mcp podman exec", "podman", []string{"--runtime", "podman", "--no-helper"}, true, false},
		{"run docker", "docker", nil, false, false},
		{"run podman", "podman", []string{"--runtime", "podman"}, false, false},
		{"mcp docker reconnect stays", "docker", []string{"--reconnect"}, true, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			needRuntime(t, tc.runtime, image)
			name := fmt.Sprintf("hutch-killed-%d-%d", os.Getpid(), i)
			t.Cleanup(func() { _ = exec.Command(tc.runtime, "rm", "-f", name).Run() })
			args := append([]string{"--tier", "container", "--image", image, "--container-name", name}, tc.args...)
			var cmd *exec.Cmd
			if tc.mcp {
				c := startChild(t, exec.Command(staticHutch(t), append(append([]string{"mcp"}, args...), "--mode", "auto")...))
				c.send(mcpInit)
				c.read(t)
				c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
					`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"echo up"}}}`)
				if m := c.read(t); !strings.Contains(fmt.Sprint(m), "up") {
					t.Fatalf("shell: %v (stderr %q)", m, c.stderr.String())
				}
				c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shell","arguments":{"command":"sleep 60"}}}`)
				time.Sleep(500 * time.Millisecond) // the call is running
				cmd = c.cmd
			} else {
				cmd = exec.Command(staticHutch(t), append(append([]string{"run"}, args...), "--", "sleep", "60")...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				for deadline := time.Now().Add(30 * time.Second); len(containersNamed(t, tc.runtime, name)) == 0; time.Sleep(100 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("hutch run made no container")
					}
				}
				time.Sleep(time.Second) // the command is running
			}
			if got := containersNamed(t, tc.runtime, name); len(got) != 1 {
				t.Fatalf("before the kill: containers %q, want one", got)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tc.stays {
				time.Sleep(5 * time.Second)
				if got := containersNamed(t, tc.runtime, name); len(got) != 1 {
					t.Errorf("a Reconnect container went away with hutch: containers %q", got)
				}
				return
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				got := containersNamed(t, tc.runtime, name)
				if len(got) == 0 {
					break
				}
				if time.Now().After(deadline) {
					out, _ := exec.Command(tc.runtime, "ps", "-a", "--filter", "label=hutch.sandbox.id="+name).CombinedOutput()
					t.Fatalf("20 s after hutch was killed its container is still there:\n%s", out)
				}
			}
		})
	}
}

func envOrDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// tempFiles lists the names of dir's entries that look like hutch's
// temporary files.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".hutch-") && strings.HasSuffix(e.Name(), ".tmp") {
			names = append(names, e.Name())
		}
	}
	return names
}

// A hutch killed with SIGKILL in the middle of a container write_file
// through the runtime's exec (--no-helper; the helper writes as the
// local tier does) leaves the file whole or absent, never torn, and its
// temporary file is gone once a later hutch writes into that directory
// (a minute on).
func TestContainerWriteKilledLeavesNoTempFile(t *testing.T) {
	image := envOrDefault("HUTCH_TEST_IMAGE", "hutch-test-busybox:latest")
	needRuntime(t, "docker", image)
	content := strings.Repeat("a", 15<<20)
	dir := t.TempDir()
	start := func() *mcpChild {
		c := startChild(t, exec.Command(staticHutch(t), "mcp", "--tier", "container", "--image", image, "--root", dir, "--mode", "auto", "--no-helper"))
		c.send(mcpInit)
		c.read(t)
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"glob","arguments":{"pattern":"*"}}}`)
		c.read(t) // the container runs
		return c
	}
	// The kill must come while the content is being written: a try whose
	// write ended first is made again, with another name.
	caught := false
	name := ""
	for try := 0; try < 5 && !caught; try++ {
		name = fmt.Sprintf("big%d.txt", try)
		c := start()
		go io.WriteString(c.in, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"`+name+`","content":"`+content+`"}}}`+"\n")
		for deadline := time.Now().Add(20 * time.Second); !caught && time.Now().Before(deadline); {
			caught = len(tempFiles(t, dir)) > 0
			if _, err := os.Stat(dir + "/" + name); err == nil {
				break
			}
		}
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.wait(t, 10*time.Second)
	}
	if !caught {
		t.Fatal("in 5 tries, no kill came while the content was being written")
	}
	time.Sleep(2 * time.Second) // what the kill left settles
	if b, err := os.ReadFile(dir + "/" + name); err == nil && len(b) != len(content) {
		t.Errorf("%s is torn: %d bytes of %d", name, len(b), len(content))
	}
	old := time.Now().Add(-2 * time.Minute)
	for _, n := range tempFiles(t, dir) {
		_ = os.Chtimes(dir+"/"+n, old, old) // as if left a while ago
	}
	c := start()
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"small.txt","content":"x"}}}`)
	if m := c.read(t); m["result"] == nil {
		t.Fatalf("write_file: %v", m)
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left after the next write: %q", left)
	}
	c.in.Close()
	c.wait(t, 30*time.Second)
}
