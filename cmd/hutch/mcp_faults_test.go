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
// see review5Child), with the client's ends of its stdio.
type mcpChild struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr lockedBuffer
	exited chan int // its exit status, once it has exited
}

func startMCP(t *testing.T, args ...string) *mcpChild {
	t.Helper()
	c := &mcpChild{exited: make(chan int, 1)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "HUTCH_REVIEW5_ARGS="+strings.Join(append([]string{"mcp"}, args...), "\x1f"))
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
