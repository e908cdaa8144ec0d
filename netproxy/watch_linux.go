package netproxy

import "golang.org/x/sys/unix"

// canWatch: Linux reports a peer's end of stream (POLLRDHUP) apart from
// data still queued.
const canWatch = true

// peerState polls the socket fd without waiting and without reading.
func peerState(fd uintptr) peer {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	if n, err := unix.Poll(p, 0); n <= 0 || err != nil {
		return peerThere // nothing yet (or EINTR): the next event says more
	}
	switch r := p[0].Revents; {
	case r&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
		return peerGone
	case r&unix.POLLRDHUP != 0:
		return peerEnded
	}
	return peerThere
}
