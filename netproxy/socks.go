package netproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"syscall"
)

// SOCKS5 (RFC 1928) constants.
const (
	socks5Version = 5

	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksConnect = 0x01

	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04

	socksSucceeded          = 0x00
	socksGeneralFailure     = 0x01
	socksNotAllowed         = 0x02
	socksNetUnreachable     = 0x03
	socksHostUnreachable    = 0x04
	socksConnRefused        = 0x05
	socksCmdNotSupported    = 0x07
	socksAtypNotSupported   = 0x08
	socksRequestHeaderBytes = 4
)

// serveSOCKS5 serves one SOCKS5 exchange: the method negotiation (only
// "no authentication"), one CONNECT request, then the tunnel.
func (s *session) serveSOCKS5(ctx context.Context) {
	var buf [2 + 255]byte // the longest piece: VER NMETHODS and 255 methods
	if _, err := io.ReadFull(s.br, buf[:2]); err != nil {
		return
	}
	methods := buf[2 : 2+int(buf[1])]
	if _, err := io.ReadFull(s.br, methods); err != nil {
		return
	}
	if !slices.Contains(methods, socksNoAuth) {
		s.write([]byte{socks5Version, socksNoAcceptable})
		return
	}
	if !s.write([]byte{socks5Version, socksNoAuth}) {
		return
	}

	// VER CMD RSV ATYP, then the address and the port.
	hdr := buf[:socksRequestHeaderBytes]
	if _, err := io.ReadFull(s.br, hdr); err != nil || hdr[0] != socks5Version {
		return
	}
	cmd, atyp := hdr[1], hdr[3]
	var host string
	switch atyp {
	case socksAtypIPv4:
		if _, err := io.ReadFull(s.br, buf[:4]); err != nil {
			return
		}
		host = netip.AddrFrom4([4]byte(buf[:4])).String()
	case socksAtypIPv6:
		if _, err := io.ReadFull(s.br, buf[:16]); err != nil {
			return
		}
		host = netip.AddrFrom16([16]byte(buf[:16])).String()
	case socksAtypDomain:
		if _, err := io.ReadFull(s.br, buf[:1]); err != nil {
			return
		}
		name := buf[1 : 1+int(buf[0])]
		if _, err := io.ReadFull(s.br, name); err != nil {
			return
		}
		host = string(name)
	default:
		s.socksReply(socksAtypNotSupported)
		return
	}
	if _, err := io.ReadFull(s.br, buf[:2]); err != nil {
		return
	}
	port := int(binary.BigEndian.Uint16(buf[:2]))
	s.endHead()
	if cmd != socksConnect {
		s.socksReply(socksCmdNotSupported)
		return
	}

	up, err := s.p.dialer.DialHost(ctx, host, port)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			s.p.record(r.HostPort())
		}
		s.socksReply(socksErrorCode(err))
		return
	}
	if !s.setUpstream(up) {
		return
	}
	if !s.socksReply(socksSucceeded) {
		return
	}
	s.tunnel(up)
}

// socksErrorCode maps a dial error to a SOCKS5 reply code.
func socksErrorCode(err error) byte {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRefused):
		return socksNotAllowed
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreachable
	case errors.As(err, new(*ResolveError)), errors.Is(err, syscall.EHOSTUNREACH), errors.As(err, &ne) && ne.Timeout():
		return socksHostUnreachable
	}
	return socksGeneralFailure
}

// socksReply writes a reply. Its bound address is always 0.0.0.0:0: the
// address the proxy connected from is the host's, which a sandboxed
// client has no business learning (clients of CONNECT do not use it).
func (s *session) socksReply(code byte) bool {
	return s.write([]byte{socks5Version, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
}

// write sends b to the client at once.
func (s *session) write(b []byte) bool {
	s.bw.Write(b)
	return s.bw.Flush() == nil
}
