package container_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
)

// benchSandbox is a started fast-path sandbox with a small file.
func benchSandbox(b testing.TB) *container.Sandbox {
	sb := onHelper(b, newSB(b, container.Options{}))
	if err := sb.Write(bg, "small.txt", []byte("hello from a small file\n")); err != nil {
		b.Fatal(err)
	}
	return sb
}

// BenchmarkStart is a sandbox's start (the container made, the helper
// connected) and its Close, on each path.
func BenchmarkStart(b *testing.B) {
	for _, bc := range []struct {
		name string
		o    container.Options
	}{{"helper", container.Options{}}, {"exec", container.Options{NoHelper: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				sb := newSB(b, bc.o)
				if err := sb.Start(bg); err != nil {
					b.Fatal(err)
				}
				if err := sb.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHelperRead(b *testing.B) {
	sb := benchSandbox(b)
	for b.Loop() {
		if _, err := sb.Read(bg, "small.txt"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHelperShell(b *testing.B) {
	sb := benchSandbox(b)
	for b.Loop() {
		if r, err := sb.Exec(bg, sandbox.Command{Shell: "echo hi"}); err != nil || string(r.Stdout) != "hi\n" {
			b.Fatal(r, err)
		}
	}
}

func BenchmarkDockerExecCat(b *testing.B) {
	sb := benchSandbox(b)
	for b.Loop() {
		if err := exec.Command("docker", "exec", sb.ID(), "cat", "/workspace/small.txt").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDockerExecShell(b *testing.B) {
	sb := benchSandbox(b)
	for b.Loop() {
		if err := exec.Command("docker", "exec", sb.ID(), "sh", "-c", "echo hi").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLatencyReport measures, in one run, a warm read_file (Read of a
// small file) and a small shell (echo hi) through the helper against one
// docker exec per operation, and prints p50, p99 and the ratios, with a
// bare fork+exec of the same shell on the host as the floor of any exec. It runs
// only when HUTCH_BENCH_N is set (bench/container.sh sets it).
func TestLatencyReport(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HUTCH_BENCH_N"))
	if n <= 0 {
		t.Skip("set HUTCH_BENCH_N (bench/container.sh does) to measure")
	}
	sb := benchSandbox(t)
	id := sb.ID()
	measure := func(name string, runs int, op func() error) []time.Duration {
		for range 3 { // warm up
			if err := op(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		d := make([]time.Duration, 0, runs)
		for range runs {
			start := time.Now()
			if err := op(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		return d
	}
	pct := func(d []time.Duration, p int) time.Duration { return d[min(len(d)-1, len(d)*p/100)] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%8.2f ms", float64(d)/1e6) }
	nDocker := max(n/5, 20)
	read := measure("helper read", n, func() error { _, err := sb.Read(bg, "small.txt"); return err })
	shell := measure("helper shell", n, func() error {
		r, err := sb.Exec(bg, sandbox.Command{Shell: "echo hi"})
		if err == nil && string(r.Stdout) != "hi\n" {
			err = fmt.Errorf("stdout %q", r.Stdout)
		}
		return err
	})
	dcat := measure("docker exec cat", nDocker, func() error {
		return exec.Command("docker", "exec", id, "cat", "/workspace/small.txt").Run()
	})
	dsh := measure("docker exec sh", nDocker, func() error {
		return exec.Command("docker", "exec", id, "sh", "-c", "echo hi").Run()
	})
	// The floor: the same shell started by a bare fork+exec on the host.
	bare := measure("bare fork+exec", n, func() error { return exec.Command("/bin/sh", "-c", "echo hi").Run() })
	fmt.Printf("%-34s %5s %11s %11s\n", "operation", "runs", "p50", "p99")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"read_file via helper", read}, {"docker exec cat FILE", dcat},
		{"shell 'echo hi' via helper", shell}, {"docker exec sh -c 'echo hi'", dsh},
		{"host fork+exec sh -c 'echo hi'", bare},
	} {
		fmt.Printf("%-34s %5d %s %s\n", r.name, len(r.d), ms(pct(r.d, 50)), ms(pct(r.d, 99)))
	}
	fmt.Printf("read_file: helper is %.1fx faster than docker exec at p50 (targets: p50 <= 5 ms, and >= 50x with the static build)\n",
		float64(pct(dcat, 50))/float64(pct(read, 50)))
	fmt.Printf("shell:     helper is %.1fx faster than docker exec at p50 (target: p50 <= 5 ms and >= 20x)\n",
		float64(pct(dsh, 50))/float64(pct(shell, 50)))
}
