package tierkit_test

import (
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Lives.Close's grace is for both writers together: with stdout's and
// stderr's writers both stalled it returns after about one grace, not
// one per writer; a writer that keeps up still gets everything.
func TestLivesCloseOneGraceForBoth(t *testing.T) {
	const grace = time.Second
	release := make(chan struct{})
	defer close(release)
	stalled := writerFunc(func(p []byte) (int, error) { <-release; return len(p), nil })
	for _, c := range []struct {
		name string
		cmd  sandbox.Command
	}{
		{"both stalled", sandbox.Command{Stdout: stalled, Stderr: stalled}},
		{"stderr stalled", sandbox.Command{Stdout: &syncBuffer{}, Stderr: stalled}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ls := tierkit.NewLives(c.cmd)
			for _, l := range ls {
				// The first write is taken by the forwarder and stalls
				// it; the second stays queued.
				for range 2 {
					if _, err := l.Write([]byte("out\n")); err != nil {
						t.Fatal(err)
					}
				}
			}
			time.Sleep(50 * time.Millisecond) // the forwarders have taken their first write
			start := time.Now()
			ls.Close(grace)
			if d := time.Since(start); d >= 2*grace-100*time.Millisecond {
				t.Errorf("Close took %v with a grace of %v: it waited once per writer", d, grace)
			} else if d < grace-100*time.Millisecond {
				t.Errorf("Close took %v, less than its grace of %v, with a stalled writer", d, grace)
			}
			if b, ok := c.cmd.Stdout.(*syncBuffer); ok && b.String() != "out\nout\n" {
				t.Errorf("the writer that keeps up got %q", b.String())
			}
		})
	}
}
