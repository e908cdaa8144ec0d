package container

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hutchsandbox/hutch/internal/boundary"
)

// processOwner identifies one process of one boot of one machine: the
// kernel's boot id (random at each boot, so it also tells machines
// apart), the inode of its PID namespace, its PID and its start time in
// clock ticks (which tells it from a later process given the same PID).
type processOwner struct {
	boot           string
	ns, pid, start uint64
}

func (p processOwner) String() string {
	return fmt.Sprintf("%s:%d:%d:%d", p.boot, p.ns, p.pid, p.start)
}

// ownerRE is the exact form of an owner label.
var ownerRE = lazyRegexp(`^([0-9a-f-]{36}):([0-9]+):([0-9]+):([0-9]+)$`)

// parseOwner reads an owner label; ok is false for any other form.
func parseOwner(v string) (p processOwner, ok bool) {
	m := ownerRE().FindStringSubmatch(v)
	if m == nil {
		return p, false
	}
	p.boot = m[1]
	for i, dst := range []*uint64{&p.ns, &p.pid, &p.start} {
		n, err := strconv.ParseUint(m[i+2], 10, 64)
		if err != nil {
			return p, false
		}
		*dst = n
	}
	return p, true
}

// selfProcess is this process as a container's owner; its boot is ""
// when the kernel does not say.
var selfProcess = sync.OnceValue(func() processOwner {
	p := processOwner{pid: uint64(os.Getpid()), ns: boundary.PIDNamespace()}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		p.boot = strings.TrimSpace(string(b))
	}
	p.start, _ = boundary.ProcessStart(int(p.pid))
	return p
})

// Owner is this process as the LabelOwner label names it
// ("BOOT-ID:PID-NAMESPACE:PID:START"), or "" when it cannot be told
// (no /proc).
func Owner() string {
	p := selfProcess()
	if p.boot == "" || p.ns == 0 || p.start == 0 {
		return ""
	}
	return p.String()
}

// ownerGone reports whether the owner label v names a process that has
// ended: one of this boot and this PID namespace whose PID is free or
// another process's. Any other label (another machine, boot or
// namespace, whose processes this one cannot see; a malformed one; this
// very process) is not known gone.
func ownerGone(v string) (gone bool, why string) {
	p, ok := parseOwner(v)
	self := selfProcess()
	switch {
	case !ok:
		return false, "its owner label is not of hutch's form"
	case p.boot != self.boot:
		return false, "its owner ran on another machine or before a reboot"
	case p.ns != self.ns:
		return false, "its owner ran in another PID namespace"
	case p == self:
		return false, "its owner is this process"
	case p.pid > 1<<22:
		return false, "its owner's PID is out of range"
	}
	start, err := boundary.ProcessStart(int(p.pid))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, fmt.Sprintf("its owner, PID %d, has exited", p.pid)
	case err == nil && start != p.start:
		return true, fmt.Sprintf("its owner, PID %d, has exited (the PID is another process's now)", p.pid)
	case err != nil:
		return false, "its owner could not be looked up: " + err.Error()
	}
	return false, fmt.Sprintf("its owner, PID %d, is running", p.pid)
}
