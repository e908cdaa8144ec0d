package container

import (
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
