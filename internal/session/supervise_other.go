//go:build linux && !amd64 && !arm64

package session

// auditArch is zero where hutch has no system-call numbers: the
// supervisor then decodes nothing, and seccomp.NotifyProgram refuses to
// build, so no command is supervised there.
const auditArch = 0

func decodeLegacy(*seccompNotif) (call, bool) { return call{}, false }
