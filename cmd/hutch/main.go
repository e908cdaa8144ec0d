// Command hutch gives an AI agent's tools a sandbox and a permission gate:
// it runs commands in sandboxes, serves the tools over MCP, and keeps the
// approvals people give.
//
//	hutch run [--tier isolated|container|local|virtual] [--root DIR] [--timeout DUR] [--env K=V]... [--json] -- CMD [ARG...]
//	hutch mcp [--tier ...] [--root DIR] [--mode read_only|auto|ask|approve] [--http ADDR] ...
//	hutch approvals list|approve ID|deny ID|check --store FILE
//	hutch rules check FILE | test FILE KIND ARG
//	hutch check [--json]
//	hutch gc [--runtime docker|podman] [--dry-run]
//	hutch version
//
// Every command's --help lists its flags; docs/cli.md and docs/mcp.md
// describe them.
//
// Exit status of "hutch run": the command's own; 124 when it timed out; 125
// when hutch could not run it (the reason is one line on stderr); 126 not
// executable; 127 not found; 128+N when killed by signal N. The other
// commands exit 0, or 125 with one line on stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/helper"
)

// Exit statuses hutch itself uses.
const (
	exitUsage = 125 // hutch could not run the command
)

// exitError carries an exit status out of a cobra command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	helper.Main() // the isolated tier's helpers are this binary
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// commands are hutch's subcommands by name, each built only when needed.
var commands = []struct {
	name  string
	build func() *cobra.Command
}{
	{"run", newRunCmd}, {"check", newCheckCmd}, {"version", newVersionCmd}, {"mcp", newMCPCmd},
	{"approvals", newApprovalsCmd}, {"gc", newGCCmd}, {"code", newCodeCmd}, {"serve", newServeCmd},
	{"rules", newRulesCmd},
}

// subcommands builds the subcommand args name, when they name one: a
// command's flags (dozens for run and mcp) are not built for another's
// run. Anything else (no arguments, a flag, help, completion, a name
// hutch does not have) gets every subcommand, so that help lists them
// and an unknown name gets cobra's suggestions.
func subcommands(args []string) []*cobra.Command {
	if len(args) > 0 {
		for _, c := range commands {
			if c.name == args[0] {
				return []*cobra.Command{c.build()}
			}
		}
	}
	all := make([]*cobra.Command, len(commands))
	for i, c := range commands {
		all[i] = c.build()
	}
	return all
}

// execute runs the CLI and returns its exit status. Tests call it directly.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "hutch",
		Short:         "Sandboxes and permissions for the tools AI agents use",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(subcommands(args)...)
	ctx, stop := signalContext()
	defer stop()
	err := root.ExecuteContext(ctx)
	// hutch exits next: the isolated one-shots' teardowns (run, run_code
	// under mcp, code install) end first, so that no empty control group
	// is left behind; a stop signal does not cut them short (they take
	// milliseconds), a teardown stuck for seconds does.
	_ = config.DrainOneShots()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintln(stderr, "hutch: "+oneLine(err.Error()))
	return exitUsage
}

// stopSignal is the cause of the context hutch's commands run in when a
// SIGINT or SIGTERM ended it.
type stopSignal struct{ sig syscall.Signal }

func (s stopSignal) Error() string { return "stopped by " + unix.SignalName(s.sig) }

// signalContext returns a context that SIGINT or SIGTERM ends, with a
// stopSignal as its cause; stop releases it.
func signalContext() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(stopSignal{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// oneLine folds s to one line for the error hutch prints: runs of white
// space become one space, and any other character a terminal would act
// on (an escape, a backspace, a bidi override) is shown escaped (\x1b,
// \u202e), so echoed input cannot rewrite what the person reads.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.ValidString(s) && strings.IndexFunc(s, notPrintable) < 0 {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			// A byte that is no UTF-8 (0x9b is a terminal's 8-bit CSI).
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case notPrintable(r):
			q := strconv.QuoteRune(r) // '\x1b'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
	}
	return b.String()
}

func notPrintable(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }
