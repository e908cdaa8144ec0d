package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// A .git the supervisor made (git init in a writable directory) may get
// a config, but only one the supervisor checked and wrote itself: git
// writes its config to config.lock and renames that over config; the
// supervisor reads config.lock, accepts it only when it holds nothing but
// the settings git init writes (gitInitConfig), writes a new file of its
// own with what it read, renames that into place, and removes
// config.lock. The file at config is then one no command ever held open
// for writing, and none may open it so (open for writing is notified, and
// refused there and for that file wherever it goes).

// gitInitConfig are the settings a checked config may hold, by section:
// what git init writes on Linux, and nothing that runs anything.
var gitInitConfig = map[string][]string{
	"core":       {"repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase", "precomposeunicode", "symlinks"},
	"extensions": {"objectformat", "refstorage"},
}

// maxGitConfig bounds what a checked config may be.
const maxGitConfig = 64 << 10

// safeGitConfig reports whether data is a git config holding only
// gitInitConfig's settings, written exactly as git writes them: lines
// "[section]" and "\tkey = value", the value of letters, digits, '.',
// '_' and '-'. Anything else (includes, quoting, continuation lines,
// comments, subsections, other keys) is refused rather than parsed: this
// subset means to git what it means here.
func safeGitConfig(data []byte) bool {
	if len(data) == 0 {
		return true
	}
	if data[len(data)-1] != '\n' {
		return false
	}
	section := ""
	for _, line := range strings.Split(string(data[:len(data)-1]), "\n") {
		if name, ok := strings.CutPrefix(line, "["); ok {
			name, ok = strings.CutSuffix(name, "]")
			if _, known := gitInitConfig[name]; !ok || !known {
				return false
			}
			section = name
			continue
		}
		kv, ok := strings.CutPrefix(line, "\t")
		if !ok || section == "" {
			return false
		}
		key, val, ok := strings.Cut(kv, " = ")
		if !ok || val == "" || !allowedKey(section, key) {
			return false
		}
		for _, c := range val {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}

func allowedKey(section, key string) bool {
	for _, k := range gitInitConfig[section] {
		if k == key {
			return true
		}
	}
	return false
}

// checkInConfig does rename(dir/last, newDir/newLast) where newDir/newLast
// is the config of a .git the supervisor made: see above.
func (s *supervisor) checkInConfig(dir int, last string, newDir int, newLast string) error {
	var a, b unix.Statx_t
	if err := unix.Statx(dir, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &a); err != nil {
		return err
	}
	if err := unix.Statx(newDir, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &b); err != nil {
		return err
	}
	if a.Mask&b.Mask&unix.STATX_MNT_ID == 0 || a.Mnt_id != b.Mnt_id {
		return unix.EXDEV // as rename would say
	}
	src, err := unix.Openat(dir, last, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return errProtected // a link as config
		}
		return err
	}
	f := os.NewFile(uintptr(src), "config.lock")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errProtected
	}
	data, err := io.ReadAll(io.LimitReader(f, maxGitConfig+1))
	if err != nil {
		return err
	}
	if len(data) > maxGitConfig || !safeGitConfig(data) {
		return errProtected
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := ".hutch-config-" + hex.EncodeToString(r[:])
	fd, err := unix.Openat(newDir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, st.Mode&0o666)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), tmp)
	_, werr := out.Write(data)
	var made unix.Stat_t
	serr := unix.Fstat(fd, &made)
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = serr
	}
	if werr == nil {
		werr = unix.Renameat(newDir, tmp, newDir, newLast)
	}
	if werr != nil {
		_ = unix.Unlinkat(newDir, tmp, 0)
		return werr
	}
	at, err := os.Readlink(selfFD(newDir))
	if err != nil {
		at = "" // sealed wherever it goes
	} else {
		at = strings.TrimPrefix(path.Join(at, newLast), "/")
	}
	s.sealed[idOf(&made)] = at
	_ = unix.Unlinkat(dir, last, 0)
	return nil
}
