// Command timecmd runs a command N times in sequence and prints the wall
// time of one run in milliseconds: median, mean, min and max. bench/isolated.sh
// times every contender with it, the bare fork+exec baseline of /bin/true
// included, so all of them pay the same os/exec cost around the measurement.
//
// With -gap, each run (warm-up runs too) comes after that pause, which
// is not timed: one run at a time, as an agent calls a tool, rather than
// back to back.
//
// Usage: go run ./bench/timecmd [-n N] [-warmup W] [-gap D] -- CMD [ARG...]
//
// Output (one line): "median MED mean AVG min MIN max MAX ms over N runs".
// Stdin and stdout are /dev/null; stderr is kept and shown when a run fails.
// Any run that exits non-zero (warm-up runs included) fails the whole
// measurement with exit status 1.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 200, "timed runs")
	warmup := flag.Int("warmup", 3, "untimed runs first")
	gap := flag.Duration("gap", 0, "untimed pause before each run")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: timecmd [-n N] [-warmup W] [-gap D] -- CMD [ARG...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *n < 1 || *warmup < 0 || *gap < 0 {
		flag.Usage()
		os.Exit(2)
	}
	argv := flag.Args()
	for i := 0; i < *warmup; i++ {
		time.Sleep(*gap)
		if _, err := once(argv); err != nil {
			fail("warm-up run %d: %v", i+1, err)
		}
	}
	runs := make([]time.Duration, *n)
	for i := range runs {
		time.Sleep(*gap)
		d, err := once(argv)
		if err != nil {
			fail("run %d: %v", i+1, err)
		}
		runs[i] = d
	}
	slices.Sort(runs)
	var sum time.Duration
	for _, d := range runs {
		sum += d
	}
	med := runs[len(runs)/2]
	if len(runs)%2 == 0 {
		med = (runs[len(runs)/2-1] + runs[len(runs)/2]) / 2
	}
	fmt.Printf("median %.3f mean %.3f min %.3f max %.3f ms over %d runs\n",
		ms(med), ms(sum/time.Duration(len(runs))), ms(runs[0]), ms(runs[len(runs)-1]), len(runs))
}

// once runs argv to completion and returns its wall time, from just before
// the fork to just after the wait.
func once(argv []string) (time.Duration, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
			return d, fmt.Errorf("%v: %s", err, msg)
		}
		return d, err
	}
	return d, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "timecmd: "+format+"\n", args...)
	os.Exit(1)
}
