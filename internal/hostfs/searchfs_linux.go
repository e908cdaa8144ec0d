package hostfs

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/internal/tierkit"
)

// The search's fast path. os.Root opens a path with about eight system
// calls (one openat per component, fstat, fcntl, epoll_ctl...) and lists
// a directory with an fstatat per entry; a search of 20,000 files spends
// most of its time there. Here a path is opened with one openat2 below
// the root's descriptor, and a directory is listed with getdents64 alone,
// typed by the entries' own d_type.
//
// The openat2 is told RESOLVE_BENEATH (nothing above the root) and
// RESOLVE_NO_SYMLINKS (no link at any component, magic links included),
// not RESOLVE_NO_XDEV: mounts inside the root (the isolated tier's) are
// the root's. So the fast path only ever opens a path made of plain
// names, which os.Root would open too, to the same file; a path with a
// link anywhere in it fails (ELOOP) and goes to os.Root, as does every
// other failure (a missing file, a denied one, ENOSYS or EPERM where a
// seccomp filter refuses openat2): every error, and every link followed or
// refused (absolute ones, those leading out, the ninth in a chain), is
// os.Root's own. One difference remains: the kernel walks a directory it
// may search but not read (mode 0711 not owned) where os.Root, which opens
// every component, fails; the file itself is opened with the same
// permission check either way.

// openat2Off forces the os.Root path (tests).
var openat2Off bool

const (
	// fastResolve confines an openat2 below the root and refuses every
	// symbolic link, which os.Root then resolves.
	fastResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	// fileFlags are os.Root's flags for a search's opens (O_NONBLOCK: a
	// FIFO never blocks), dirFlags its flags for listings.
	fileFlags = unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	dirFlags  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC
)

// searchRoot is the root directory opened once more through the os.Root,
// for openat2 to resolve paths below its descriptor. It is nil where
// openat2 cannot be used. FS opens it in New and closes it in Close;
// searches run between the two (FS.begin), and use the descriptor only
// through dir's RawConn, which holds it open during each call.
type searchRoot struct {
	dir *os.File
	rc  syscall.RawConn
	// off: openat2 failed with ENOSYS or EPERM, as a seccomp filter
	// installed after New makes it (one that refuses a single file
	// costs the fast path, never a result).
	off atomic.Bool
}

// openSearchRoot opens root's directory for the fast path and tries
// openat2 on it once; nil when either fails (no openat2, or a seccomp
// filter refusing it), and every search then goes through os.Root.
func openSearchRoot(root *os.Root) *searchRoot {
	d, err := root.OpenFile(".", dirFlags, 0)
	if err != nil {
		return nil
	}
	r := &searchRoot{dir: d}
	if r.rc, err = d.SyscallConn(); err == nil {
		var fd int
		if fd, err = r.open(".", dirFlags); err == nil {
			unix.Close(fd)
			return r
		}
	}
	d.Close()
	return nil
}

// close releases the descriptor; r may be nil.
func (r *searchRoot) close() error {
	if r == nil {
		return nil
	}
	return r.dir.Close()
}

// open opens name (root-relative, cleaned) below the root with flags
// through openat2, refusing any link. Any error means: ask os.Root.
func (r *searchRoot) open(name string, flags int) (int, error) {
	if r == nil || openat2Off || r.off.Load() {
		return -1, errors.ErrUnsupported
	}
	how := unix.OpenHow{Flags: uint64(flags), Resolve: fastResolve}
	fd, err := -1, error(nil)
	if cerr := r.rc.Control(func(dfd uintptr) {
		for {
			fd, err = unix.Openat2(int(dfd), name, &how)
			if err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		return -1, cerr
	}
	if err == unix.ENOSYS || err == unix.EPERM {
		r.off.Store(true)
	}
	return fd, err
}

// searchFS is the root as a search walks it: opens through O_NONBLOCK (a
// FIFO never blocks) and listings through O_DIRECTORY, by openat2 when
// it can and os.Root otherwise; Write's temporary files and hidden paths
// left out.
type searchFS struct {
	rootFS
	fast *searchRoot // nil: os.Root alone
}

// searchFS is the FS a search of s walks, leaving out what hide names.
func (s *FS) searchFS(hide func(rel string) bool) search.FS {
	return searchFS{rootFS: rootFS{root: s.root, hide: hide}, fast: s.search}
}

func (f searchFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if fd, err := f.fast.open(name, dirFlags); err == nil {
		defer unix.Close(fd)
		return f.list(fd, name)
	}
	d, err := f.openDir(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return nil, err
	}
	var ents []fs.DirEntry
	if cerr := rc.Control(func(fd uintptr) { ents, err = f.list(int(fd), name) }); cerr != nil {
		return nil, cerr
	}
	return ents, err
}

func (f searchFS) Open(name string) (fs.File, error) {
	if f.hidden(name) {
		return nil, tierkit.PathError("search", name, fs.ErrPermission)
	}
	if fd, err := f.fast.open(name, fileFlags); err == nil {
		return &searchFile{fd: fd, name: name}, nil
	}
	return f.rootFS.Open(name)
}

// direntBufs are getdents64 buffers.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// listing is what a listing's entries share, for Info.
type listing struct {
	root *os.Root
	dir  string
}

// list reads the directory open as fd (the directory name) with
// getdents64: each entry typed by its d_type, or by an fstatat relative
// to fd where the file system gives none; never by path. Entries gone
// since are left out, as are Write's temporary files and hidden paths.
func (f searchFS) list(fd int, name string) ([]fs.DirEntry, error) {
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	l := &listing{root: f.root, dir: name}
	var ents []fs.DirEntry
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ents, &fs.PathError{Op: "readdirent", Path: name, Err: err}
		}
		if n <= 0 {
			return ents, nil
		}
		for b := buf[:n]; len(b) > 0; {
			d, rest, ok := nextDirent(b)
			if !ok {
				return ents, &fs.PathError{Op: "readdirent", Path: name, Err: io.ErrUnexpectedEOF}
			}
			b = rest
			if d.ino == 0 || d.name == "." || d.name == ".." || !f.keep(name, d.name) {
				continue
			}
			typ, known := direntType(d.typ)
			if !known {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					if err == unix.ENOENT {
						continue
					}
					return ents, &fs.PathError{Op: "fstatat", Path: path.Join(name, d.name), Err: err}
				}
				typ = modeOf(st.Mode).Type()
			}
			ents = append(ents, &dirent{name: d.name, typ: typ, l: l})
		}
	}
}

type rawDirent struct {
	ino  uint64
	typ  uint8
	name string
}

// nextDirent parses the linux_dirent64 at the start of b.
func nextDirent(b []byte) (rawDirent, []byte, bool) {
	const (
		offIno    = unsafe.Offsetof(unix.Dirent{}.Ino)
		offReclen = unsafe.Offsetof(unix.Dirent{}.Reclen)
		offType   = unsafe.Offsetof(unix.Dirent{}.Type)
		offName   = unsafe.Offsetof(unix.Dirent{}.Name)
	)
	if len(b) < int(offName) {
		return rawDirent{}, nil, false
	}
	reclen := int(binary.NativeEndian.Uint16(b[offReclen:]))
	if reclen < int(offName) || reclen > len(b) {
		return rawDirent{}, nil, false
	}
	d := rawDirent{ino: binary.NativeEndian.Uint64(b[offIno:]), typ: b[offType]}
	name := b[offName:reclen]
	for i, c := range name {
		if c == 0 {
			name = name[:i]
			break
		}
	}
	d.name = string(name)
	return d, b[reclen:], true
}

// direntType is d_type's fs.FileMode type, if d_type says.
func direntType(t uint8) (fs.FileMode, bool) {
	switch t {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	}
	return 0, false
}

// dirent is an entry of a listing.
type dirent struct {
	name string
	typ  fs.FileMode
	l    *listing
}

func (d *dirent) Name() string      { return d.name }
func (d *dirent) IsDir() bool       { return d.typ.IsDir() }
func (d *dirent) Type() fs.FileMode { return d.typ }
func (d *dirent) String() string    { return fs.FormatDirEntry(d) }

// Info is Lstat through the os.Root (the search never asks).
func (d *dirent) Info() (fs.FileInfo, error) {
	return d.l.root.Lstat(path.Join(d.l.dir, d.name))
}

// searchFile is a file openat2 opened: a bare descriptor, which reads
// with plain read(2) (a search only opens regular files to read them,
// and os.NewFile would cost an fcntl and a failing epoll_ctl more).
type searchFile struct {
	fd   int
	name string
}

func (f *searchFile) Read(b []byte) (int, error) {
	if f.fd < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrClosed}
	}
	for {
		n, err := unix.Read(f.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *searchFile) Stat() (fs.FileInfo, error) {
	if f.fd < 0 {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	fi := &fileStat{name: path.Base(f.name)}
	if err := syscall.Fstat(f.fd, &fi.st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: err}
	}
	return fi, nil
}

func (f *searchFile) Close() error {
	if f.fd < 0 {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// fileStat is an fstat as an fs.FileInfo, as os describes one.
type fileStat struct {
	name string
	st   syscall.Stat_t
}

func (s *fileStat) Name() string       { return s.name }
func (s *fileStat) Size() int64        { return s.st.Size }
func (s *fileStat) Mode() fs.FileMode  { return modeOf(s.st.Mode) }
func (s *fileStat) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *fileStat) IsDir() bool        { return s.Mode().IsDir() }
func (s *fileStat) Sys() any           { return &s.st }

// modeOf is st_mode as an fs.FileMode (os's fillFileStatFromSys).
func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
