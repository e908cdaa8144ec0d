package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress notifications for a call whose request carried a progressToken
// (a client sets one to hear how a long call goes, and, with the
// TypeScript SDK's resetTimeoutOnProgress, to keep it from timing out).
// Variables for the tests.
var (
	// progressEvery is the longest a call goes without a notification,
	// whether or not the tool reports anything.
	progressEvery = 10 * time.Second
	// progressGap is the shortest time between two notifications: a tool
	// reporting more often (a shell printing fast) is heard at this rate,
	// with its latest message.
	progressGap = 250 * time.Millisecond
)

// progress sends a call's notifications from a goroutine of its own, so a
// tool reporting never waits for the transport.
type progress struct {
	ctx     context.Context
	ss      *mcp.ServerSession
	token   any
	started time.Time

	mu      sync.Mutex
	message string // the tool's latest, not yet sent
	fresh   bool

	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

func startProgress(ctx context.Context, ss *mcp.ServerSession, token any) *progress {
	p := &progress{ctx: ctx, ss: ss, token: token, started: time.Now(),
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// report is the tool.ProgressFunc: it notes message for the next
// notification.
func (p *progress) report(message string) {
	p.mu.Lock()
	p.message, p.fresh = message, true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop ends the notifications; none is sent once it returns (so none
// follows the call's response).
func (p *progress) stop() {
	close(p.quit)
	<-p.done
}

func (p *progress) run() {
	defer close(p.done)
	idle := time.NewTimer(progressEvery) // restarted by every notification
	defer idle.Stop()
	var n float64 // notifications sent: the progress value, rising by one each
	var last time.Time
	send := func() {
		p.mu.Lock()
		msg, fresh := p.message, p.fresh
		p.fresh = false
		p.mu.Unlock()
		elapsed := time.Since(p.started).Round(time.Second)
		if fresh {
			msg = fmt.Sprintf("%s (running for %v)", msg, elapsed)
		} else {
			msg = fmt.Sprintf("running for %v", elapsed)
		}
		n++
		last = time.Now()
		idle.Reset(progressEvery)
		_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: n, Message: msg})
	}
	var gap <-chan time.Time // a report waits for the gap to end
	for {
		select {
		case <-p.quit:
			return
		case <-idle.C:
			send()
		case <-p.wake:
			if gap != nil {
				continue
			}
			if wait := progressGap - time.Since(last); wait > 0 {
				gap = time.After(wait)
				continue
			}
			send()
		case <-gap:
			gap = nil
			send()
		}
	}
}
