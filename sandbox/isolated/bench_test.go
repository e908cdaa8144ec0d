package isolated_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// BenchmarkForkExec is the baseline: a bare fork+exec of /bin/true.
func BenchmarkForkExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmExec runs /bin/true in an existing sandbox: the setup is
// paid once; each run still gets its own PID namespace and confinement.
func BenchmarkWarmExec(b *testing.B) {
	sb, err := isolated.New(bg, isolated.Options{Policy: policy.Default()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	for b.Loop() {
		r, err := sb.Exec(bg, sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r.ExitCode)
		}
	}
}

// BenchmarkOneShot builds a sandbox, runs /bin/true and tears it down,
// runs back to back.
func BenchmarkOneShot(b *testing.B) { benchOneShot(b, 0) }

// BenchmarkOneShotSpaced is BenchmarkOneShot one run at a time, as an
// agent calls a tool: each run after a pause of spacedGap (not timed),
// long enough for the kernel to go idle between runs. As root, what a
// cgroup change costs then differs from runs back to back, where one
// run's grace period of the kernel's RCU may still be running for the
// next.
func BenchmarkOneShotSpaced(b *testing.B) { benchOneShot(b, spacedGap) }

func benchOneShot(b *testing.B, gap time.Duration) {
	for b.Loop() {
		pause(b, gap)
		r, err := isolated.Run(bg, policy.Default(), sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r.ExitCode)
		}
	}
}

// spacedGap is the pause before each run of the Spaced benchmarks.
const spacedGap = 100 * time.Millisecond

// pause waits gap (none for 0) with b's timer stopped.
func pause(b *testing.B, gap time.Duration) {
	if gap > 0 {
		b.StopTimer()
		time.Sleep(gap)
		b.StartTimer()
	}
}

// BenchmarkBwrapOneShot is BenchmarkOneShot's peer: the same Go program
// starting bubblewrap with an mxc-like read-only root (bench/bwrap-mxc.sh)
// to run /bin/true. bench/isolated.sh passes that command line, one
// argument a line, in HUTCH_BENCH_BWRAP.
func BenchmarkBwrapOneShot(b *testing.B) { benchBwrap(b, 0) }

// BenchmarkBwrapOneShotSpaced is BenchmarkOneShotSpaced's peer.
func BenchmarkBwrapOneShotSpaced(b *testing.B) { benchBwrap(b, spacedGap) }

func benchBwrap(b *testing.B, gap time.Duration) {
	argv := strings.Split(strings.TrimSpace(os.Getenv("HUTCH_BENCH_BWRAP")), "\n")
	if argv[0] == "" {
		b.Skip("HUTCH_BENCH_BWRAP is not set: bench/isolated.sh sets it to bubblewrap's command line")
	}
	for b.Loop() {
		pause(b, gap)
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmRead reads a file through an existing sandbox.
func BenchmarkWarmRead(b *testing.B) {
	sb, err := isolated.New(bg, isolated.Options{Policy: policy.Default()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Write(bg, "f.txt", make([]byte, 4096)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sb.Read(bg, "f.txt"); err != nil {
			b.Fatal(err)
		}
	}
}

// netClient measures, from wherever it runs, the mean time of one HTTP/1.0
// exchange on a fresh connection (200 of them) and the throughput of one
// 100 MiB download; through the sandbox's proxy when given "proxy".
const netClient = `
import socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
target = ("127.0.0.1", 3128) if mode == "proxy" else (host, port)
def get(path):
    s = socket.create_connection(target)
    url = "http://%s:%d%s" % (host, port, path) if mode == "proxy" else path
    s.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (url, host)).encode())
    n = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    s.close()
    return n
get("/")
t = time.perf_counter()
for _ in range(200):
    get("/")
conn_ms = (time.perf_counter() - t) / 200 * 1000
t = time.perf_counter()
n = get("/big")
mbps = n / (time.perf_counter() - t) / 1e6
print("%.4f %.1f %d" % (conn_ms, mbps, n))
`

// BenchmarkNetworkProxy compares a client inside a sandbox whose network
// is an allow-list (through the bridge and the proxy) with the same client
// on the host connecting directly over loopback. Reported: ms per
// connection and MB/s for each, and their ratios.
func BenchmarkNetworkProxy(b *testing.B) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		b.Skip("needs /usr/bin/python3 (scripts/test.sh installs it)")
	}
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		b.Skip(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(100<<20))
			_, _ = io.CopyN(w, zeros{}, 100<<20)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	sb, err := isolated.New(bg, isolated.Options{Policy: policy.Default().Extend(policy.Policy{Hosts: []string{"127.0.0.2:" + port}})})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	parse := func(out []byte) (connMS, mbps float64) {
		if _, err := fmt.Sscanf(string(out), "%f %f", &connMS, &mbps); err != nil {
			b.Fatalf("client said %q: %v", out, err)
		}
		return connMS, mbps
	}
	var dConn, dMB, pConn, pMB float64
	for b.Loop() {
		out, err := exec.Command("/usr/bin/python3", "-c", netClient, "direct", "127.0.0.2", port).Output()
		if err != nil {
			b.Fatal(err)
		}
		c, m := parse(out)
		dConn, dMB = dConn+c, dMB+m
		r, err := sb.Exec(bg, sandbox.Command{Args: []string{"/usr/bin/python3", "-c", netClient, "proxy", "127.0.0.2", port}})
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("%v %s", err, r.Stderr)
		}
		c, m = parse(r.Stdout)
		pConn, pMB = pConn+c, pMB+m
	}
	n := float64(b.N)
	b.ReportMetric(dConn/n, "direct-ms/conn")
	b.ReportMetric(pConn/n, "proxy-ms/conn")
	b.ReportMetric((pConn-dConn)/n, "added-ms/conn")
	b.ReportMetric(dMB/n, "direct-MB/s")
	b.ReportMetric(pMB/n, "proxy-MB/s")
	b.ReportMetric(pMB/dMB, "throughput-ratio")
}

// BenchmarkCreateSupervised is what the supervisor costs: a session over
// a writable root missing every protected path (supervised) against one
// holding them all (not), for a loop of 2000 file creations (in the
// root, and in the private /tmp), a loop of 500 renames and a command
// that creates nothing; and the start of a
// one-shot run, which takes a session when supervised.
func BenchmarkCreateSupervised(b *testing.B) {
	if err := isolated.Supported(); err != nil {
		b.Skip(err)
	}
	seeded := b.TempDir()
	for _, e := range policy.DefaultProtected {
		p := seeded + "/" + e
		_ = os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755)
		switch e {
		case ".git/hooks", ".vscode", ".idea", ".claude", ".codex", ".gemini":
			_ = os.Mkdir(p, 0o755)
		default:
			_ = os.WriteFile(p, []byte("seed"), 0o644)
		}
	}
	roots := map[string]string{"supervised": b.TempDir(), "unsupervised": seeded}
	for _, kind := range []string{"supervised", "unsupervised"} {
		dir := roots[kind]
		pol := policy.Default().Extend(policy.Policy{Write: []string{dir}})
		pol.Dir = dir
		for _, c := range []struct {
			name, shell string
			n           int
		}{
			{"2000 creates", "rm -rf out && mkdir out && i=0; while [ $i -lt 2000 ]; do : > out/f$i; i=$((i+1)); done", 2000},
			// In the private /tmp (a tmpfs, where a creation costs little):
			// what the supervisor adds shows.
			{"2000 creates in /tmp", "mkdir /tmp/out && i=0; while [ $i -lt 2000 ]; do : > /tmp/out/f$i; i=$((i+1)); done; rm -r /tmp/out", 2000},
			{"500 renames", ": > r0 && i=0; while [ $i -lt 500 ]; do mv r$i r$((i+1)); i=$((i+1)); done; rm r500", 0},
			{"true", "true", 0},
		} {
			b.Run(kind+"/"+c.name, func(b *testing.B) {
				sb, err := isolated.New(bg, isolated.Options{Policy: pol})
				if err != nil {
					b.Fatal(err)
				}
				defer sb.Close()
				for b.Loop() {
					res, err := sb.Exec(bg, sandbox.Command{Shell: c.shell})
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
					}
				}
				if c.n > 0 {
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*c.n), "µs/create")
				}
			})
		}
		b.Run(kind+"/one-shot true", func(b *testing.B) {
			for b.Loop() {
				res, err := isolated.Run(bg, pol, sandbox.Command{Shell: "true"})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
				}
			}
		})
	}
}
