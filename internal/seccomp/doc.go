// Package seccomp holds the seccomp filter hutch loads into every
// sandboxed command: [Program] builds it, as classic BPF, from the
// system-call numbers of the architecture the binary is built for (amd64
// and arm64; elsewhere Program returns an error), and [Supported] says
// whether this kernel can load it.
package seccomp
