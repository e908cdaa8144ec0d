package streamclient_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/streamclient"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// A server whose output tails do not add up to the data it sent before
// its response breaks the protocol: Exec fails with ErrProtocol, never
// takes a wrong tail for the command's output.
func TestExecRefusesTailsThatDoNotAddUp(t *testing.T) {
	for name, res := range map[string]wire.StreamResponse{
		"fewer counted":  {Status: &wire.Status{Exited: true}, StdoutSize: 10, StdoutTail: 3},
		"more counted":   {Status: &wire.Status{Exited: true}, StdoutSize: 10, StdoutTail: 5, StderrTail: 4},
		"negative count": {Status: &wire.Status{Exited: true}, StdoutSize: 10, StdoutTail: 6, StderrTail: -1},
	} {
		t.Run(name, func(t *testing.T) {
			cli, srv := net.Pipe()
			go func() {
				fw, fr := wire.NewFrameWriter(srv), wire.NewFrameReader(srv)
				_ = fw.WriteJSON(wire.FrameHello, 0, wire.Hello{Version: wire.StreamVersion, Root: "/"})
				f, err := fr.ReadFrame()
				if err != nil {
					return
				}
				_ = fw.WriteFrame(wire.FrameData, f.ID, []byte("tail5"))
				_ = fw.WriteJSON(wire.FrameResponse, f.ID, res)
				for {
					if _, err := fr.ReadFrame(); err != nil {
						return
					}
				}
			}()
			conn, err := streamclient.Open(context.Background(), cli, "the lying server")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(sandbox.ErrClosed)
			_, err = conn.Exec(context.Background(), sandbox.Command{Args: []string{"x"}, Timeout: time.Minute})
			if !errors.Is(err, wire.ErrProtocol) {
				t.Errorf("Exec = %v, want ErrProtocol", err)
			}
		})
	}
}
