package container

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Arguments that are not UTF-8 reach the fallback's scripts byte for
// byte (the runtime's exec would turn them into U+FFFD): shArgv's argv,
// run by this host's /bin/sh, gives the script exactly the words given.
func TestShArgvKeepsEveryByte(t *testing.T) {
	for _, args := range [][]string{
		{"plain", "é.txt", "sp ace"},
		{"a\xff", "a\xfe"},
		{"/w", "a\xff", "%s%d", `back\slash`, "nl\n", "\n\n", "", "-n", "'\"$x`", "\x01\x7f\x80"},
	} {
		argv := shArgv(`printf '%s\0' "$@"`, args...)
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		got := strings.Split(string(out), "\x00")
		got = got[:len(got)-1]
		if !slices.Equal(got, args) {
			t.Errorf("the script got %q, want %q", got, args)
		}
		if plain := !slices.ContainsFunc(args, func(a string) bool { return strings.ToValidUTF8(a, "") != a }); plain && argv[2] != `printf '%s\0' "$@"` {
			t.Errorf("UTF-8 words were encoded: %q", argv)
		}
	}
}

// A removal that the runtime answers with "gone" or "already being
// removed" has what it wants; any other failure is one. Found in a CI
// run: Close after docker kill of a --rm container failed with Docker's
// "removal of container ... is already in progress".
func TestRemovedAlready(t *testing.T) {
	for msg, want := range map[string]bool{
		"docker rm: Error response from daemon: No such container: hutch-1":                                                   true,
		"Error: no container with name or ID \"hutch-1\" found: no such container":                                            true,
		"docker rm: Error response from daemon: removal of container 8b54c7f47e81 is already in progress":                     true,
		"docker rm: Error response from daemon: You cannot remove a running container 8b54c7f47e81. Stop the container first": false,
		"docker rm: permission denied while trying to connect to the Docker daemon socket":                                    false,
		"already in progress": false,
	} {
		if got := removedAlready(errors.New(msg)); got != want {
			t.Errorf("removedAlready(%q) = %v, want %v", msg, got, want)
		}
	}
}
