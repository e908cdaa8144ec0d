package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Bounds of background processes (shell with background: true).
const (
	// MaxBackground is how many background processes one session may
	// have running at once.
	MaxBackground = 8
	// MaxBackgroundKept is how many a session remembers, running or
	// ended; the oldest ended one is forgotten to make room.
	MaxBackgroundKept = 32
	// MaxProcessLog is how much of a background process's output (its
	// stdout and stderr, interleaved as they came) is kept in memory: the
	// last this many bytes.
	MaxProcessLog = 1 << 20
	// MaxProcessChunk is the most one process_output answer shows.
	MaxProcessChunk = 16_000
	// MaxProcessWait is the longest process_output waits for news.
	MaxProcessWait = 30 * time.Second
	// MaxProcessInput is the most one process_input writes.
	MaxProcessInput = 1 << 20
)

// processLog is a background process's output: the last MaxProcessLog
// bytes, addressed by their offset in everything it printed.
type processLog struct {
	buf   []byte
	first int64 // offset of buf[0]
}

func (l *processLog) write(p []byte) {
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - MaxProcessLog; over > 0 {
		l.buf = slices.Delete(l.buf, 0, over)
		l.first += int64(over)
	}
}

func (l *processLog) end() int64 { return l.first + int64(len(l.buf)) }

// process is one background command.
type process struct {
	id      string
	command string
	started time.Time
	cancel  context.CancelFunc
	stdin   *io.PipeWriter

	mu     sync.Mutex
	log    processLog
	news   chan struct{} // closed and replaced whenever output or the end comes
	done   bool
	result sandbox.Result
	err    error
}

// Write takes the command's output as it comes (a live writer of Exec).
func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.log.write(b)
	p.notify()
	p.mu.Unlock()
	return len(b), nil
}

// notify wakes whoever waits for news; the caller holds mu.
func (p *process) notify() {
	close(p.news)
	p.news = make(chan struct{})
}

// processes are a session's background commands.
type processes struct {
	mu     sync.Mutex
	next   int
	all    []*process
	closed bool
}

func (ps *processes) running() int {
	n := 0
	for _, p := range ps.all {
		p.mu.Lock()
		if !p.done {
			n++
		}
		p.mu.Unlock()
	}
	return n
}

// add registers p, forgetting the oldest ended process when the session
// remembers too many; it fails when the session is closed or has
// MaxBackground running.
func (ps *processes) add(p *process) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return errors.New("the session is closing")
	}
	if ps.running() >= MaxBackground {
		return fmt.Errorf("%d background processes are running, the most one session may have: end one with process_kill first", MaxBackground)
	}
	if len(ps.all) >= MaxBackgroundKept {
		for i, old := range ps.all {
			old.mu.Lock()
			ended := old.done
			old.mu.Unlock()
			if ended {
				ps.all = slices.Delete(ps.all, i, i+1)
				break
			}
		}
	}
	ps.next++
	p.id = "p" + strconv.Itoa(ps.next)
	ps.all = append(ps.all, p)
	return nil
}

func (ps *processes) find(id string) *process {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.all {
		if p.id == id {
			return p
		}
	}
	return nil
}

// close kills every background process and waits for them to end.
func (ps *processes) close() {
	ps.mu.Lock()
	ps.closed = true
	all := slices.Clone(ps.all)
	ps.mu.Unlock()
	for _, p := range all {
		p.cancel()
		_ = p.stdin.Close()
	}
	for _, p := range all {
		p.wait(context.Background())
	}
}

// wait returns once p has ended or ctx is done.
func (p *process) wait(ctx context.Context) {
	for {
		p.mu.Lock()
		done, news := p.done, p.news
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-news:
		case <-ctx.Done():
			return
		}
	}
}

// Close ends the session's toolset: every background process it started
// is killed, with everything it started, and Close waits for them. A
// front end calls it when the agent's session ends. Calls after Close
// cannot start background processes.
func (ts *Toolset) Close() error {
	ts.procs.close()
	return nil
}

// startBackground runs cmd as a background process and answers with its
// id at once.
func (ts *Toolset) startBackground(cmd sandbox.Command, command string) Output {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	p := &process{command: command, started: time.Now(), cancel: cancel, stdin: pw, news: make(chan struct{})}
	if err := ts.procs.add(p); err != nil {
		cancel()
		return failf("shell: %v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, p, p
	cmd.MaxOutput = 4096 // the output is kept by the process log, not the result
	go func() {
		res, err := ts.opts.Sandbox.Exec(ctx, cmd)
		_ = pr.Close()
		p.mu.Lock()
		p.done, p.result, p.err = true, res, err
		p.notify()
		p.mu.Unlock()
		cancel()
	}()
	return structured(BackgroundStarted{ID: p.id, Note: "started in the background: read its output with process_output, end it with process_kill"})
}

// BackgroundStarted is the shell tool's answer for a background command.
type BackgroundStarted struct {
	ID   string `json:"id"`
	Note string `json:"note"`
}

// ProcessStatus is what process_output and process_list say about a
// background process.
type ProcessStatus struct {
	ID      string `json:"id"`
	Command string `json:"command"`
	Running bool   `json:"running"`
	// ExitCode, TimedOut and Signal are set once it ended.
	ExitCode *int   `json:"exit_code,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// Error says why the command could not run at all.
	Error     string `json:"error,omitempty"`
	StartedMS int64  `json:"started_ms_ago"`
	// OutputBytes counts everything it printed so far.
	OutputBytes int64 `json:"output_bytes"`
}

// status describes p; the caller holds p.mu.
func (p *process) status() ProcessStatus {
	st := ProcessStatus{ID: p.id, Command: preview(p.command), Running: !p.done, StartedMS: time.Since(p.started).Milliseconds(), OutputBytes: p.log.end()}
	if p.done {
		if p.err != nil {
			st.Error = describeErr(p.err)
		} else {
			code := p.result.ExitCode
			st.ExitCode, st.TimedOut, st.Signal = &code, p.result.TimedOut, p.result.Signal
		}
	}
	return st
}

// ProcessOutput is process_output's structured result.
type ProcessOutput struct {
	ProcessStatus
	// Output is what it printed from Since on (stdout and stderr as they
	// came), at most MaxProcessChunk bytes.
	Output string `json:"output"`
	Since  int64  `json:"since"`
	// Next is the since of the next call, to read on from here.
	Next int64 `json:"next"`
	// Dropped counts the bytes between since and the oldest kept, which
	// are no longer in memory.
	Dropped int64 `json:"dropped,omitempty"`
	More    bool  `json:"more,omitempty"`
}

type processOutputArgs struct {
	ID     string `json:"id"`
	Since  *int64 `json:"since,omitempty"`
	WaitMS int    `json:"wait_ms,omitempty"`
}

func processOutput(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a processOutputArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	p := ts.procs.find(a.ID)
	if p == nil {
		return failf("no background process %q in this session: process_list shows them", a.ID), nil
	}
	if a.WaitMS < 0 || time.Duration(a.WaitMS)*time.Millisecond > MaxProcessWait {
		return failf("wait_ms must be between 0 and %d", MaxProcessWait.Milliseconds()), nil
	}
	p.mu.Lock()
	since := p.log.end() // by default: what comes from now
	if a.Since != nil {
		since = *a.Since
	}
	if since < 0 {
		p.mu.Unlock()
		return failf("since must not be negative"), nil
	}
	// Wait for output past since, or the end, at most wait_ms.
	if a.WaitMS > 0 && p.log.end() <= since && !p.done {
		news := p.news
		p.mu.Unlock()
		timer := time.NewTimer(time.Duration(a.WaitMS) * time.Millisecond)
		select {
		case <-news:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return Output{}, ctx.Err()
		}
		timer.Stop()
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	out := ProcessOutput{ProcessStatus: p.status(), Since: since}
	from := max(since, p.log.first)
	out.Dropped = from - since
	end := p.log.end()
	if from < end {
		chunk := p.log.buf[from-p.log.first:]
		if len(chunk) > MaxProcessChunk {
			chunk, out.More = chunk[:MaxProcessChunk], true
		}
		out.Output = string(chunk)
		from += int64(len(chunk))
	}
	out.Next = max(from, since)
	return structured(out), nil
}

type processIDArgs struct {
	ID string `json:"id"`
}

type processInputArgs struct {
	ID   string `json:"id"`
	Data string `json:"data"`
	// EOF closes the process's standard input after data.
	EOF bool `json:"eof,omitempty"`
}

func processInput(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a processInputArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if len(a.Data) > MaxProcessInput {
		return failf("data is %d bytes, more than the %d one call writes", len(a.Data), MaxProcessInput), nil
	}
	p := ts.procs.find(a.ID)
	if p == nil {
		return failf("no background process %q in this session: process_list shows them", a.ID), nil
	}
	// What a process reads may be commands (a shell, an interpreter): it
	// passes the gate as a shell command would.
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Shell, Tool: "process_input", Detail: a.ID + ": " + a.Data, Command: a.Data}, a); !ok {
		return out, err
	}
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(p.stdin, a.Data)
		if err == nil && a.EOF {
			err = p.stdin.Close()
		}
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			return failf("process %s does not take input any more (%v): it ended, or closed its input", a.ID, err), nil
		}
	case <-time.After(10 * time.Second):
		return failf("process %s did not read its input within 10 s (the rest is still waiting for it)", a.ID), nil
	case <-ctx.Done():
		return Output{}, ctx.Err()
	}
	return structured(ProcessInputResult{OK: true, ID: a.ID, Bytes: len(a.Data)}), nil
}

// ProcessInputResult is process_input's structured result.
type ProcessInputResult struct {
	OK    bool   `json:"ok"`
	ID    string `json:"id"`
	Bytes int    `json:"bytes"`
}

func processKill(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a processIDArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	p := ts.procs.find(a.ID)
	if p == nil {
		return failf("no background process %q in this session: process_list shows them", a.ID), nil
	}
	p.cancel()
	_ = p.stdin.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p.wait(wctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return structured(p.status()), nil
}

// ProcessList is process_list's structured result.
type ProcessList struct {
	Processes []ProcessStatus `json:"processes"`
}

func processList(_ context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	if err := decode(raw, &struct{}{}); err != nil {
		return failf("%v", err), nil
	}
	ts.procs.mu.Lock()
	all := slices.Clone(ts.procs.all)
	ts.procs.mu.Unlock()
	out := ProcessList{Processes: []ProcessStatus{}}
	for _, p := range all {
		p.mu.Lock()
		out.Processes = append(out.Processes, p.status())
		p.mu.Unlock()
	}
	return structured(out), nil
}
