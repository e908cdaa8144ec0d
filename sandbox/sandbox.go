package sandbox

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"time"
)

// Feature names something a sandbox can do.
type Feature string

// The capabilities a sandbox may support.
const (
	FeatureRead  Feature = "read"
	FeatureWrite Feature = "write"
	FeatureGlob  Feature = "glob"
	FeatureStat  Feature = "stat"
	// FeatureShell is the ability to execute commands (Exec).
	FeatureShell Feature = "shell"
	// FeatureManage is List, Mkdir, Remove and Rename.
	FeatureManage Feature = "manage"
)

// Kind is the type of a filesystem entry, after following symbolic links.
type Kind string

// The kinds Stat reports.
const (
	KindFile  Kind = "file"
	KindDir   Kind = "dir"
	KindOther Kind = "other" // devices, sockets, pipes
)

// FileInfo describes one entry. Stat follows symbolic links that stay inside
// the root, so Kind is never "symlink".
type FileInfo struct {
	Path    string      // root-relative, slash-separated, as Stat resolved it
	Size    int64       // bytes; 0 for directories
	ModTime time.Time   // last modification
	Mode    fs.FileMode // permission bits and type bits
	Kind    Kind
	// Link, from List only, marks a symbolic link: Kind, Size and Mode
	// are then its target's when the link resolves inside the root, and
	// Kind is KindOther when it dangles or leads out.
	Link bool `json:",omitempty"`
	// Inode and Changed tell this version of the file from another of
	// the same name, size and modification time (a file renamed or linked
	// into its place, a modification time set back) where the tier knows
	// them, and are zero where it does not: the inode number, and the last
	// status change (ctime), which no program can set. The tools'
	// read-before-write guard compares them.
	Inode   uint64
	Changed time.Time
}

// Sandbox is the contract shared by every tier. Implementations are safe for
// concurrent use. After Close every method returns an error matching
// ErrClosed (Close itself is idempotent).
type Sandbox interface {
	// Root is the absolute, slash-separated path that relative paths are
	// resolved against ("/" for the virtual tier).
	Root() string

	// Read returns the whole content of the file at path. Files larger than
	// MaxFileSize are refused with ErrTooLarge; directories with ErrIsDir.
	Read(ctx context.Context, path string) ([]byte, error)

	// Write replaces the file at path with data, creating missing parent
	// directories. Readers see either the old or the new content, never a
	// mix. An existing file keeps its permission bits; a new one gets 0644.
	Write(ctx context.Context, path string, data []byte) error

	// Glob returns the root-relative paths matching pattern. "**" matches any
	// number of directories; "*" never crosses "/". A pattern ending in "/"
	// matches directories only; any other pattern matches everything that is
	// not a directory. The root itself is never a match. "**" does not
	// descend into symbolic links to directories. Entries that resolve
	// outside the root, or do not resolve at all (dangling links), are
	// dropped. The result is sorted, free of duplicates and never nil; more
	// than MaxGlobResults matches is ErrTooLarge.
	Glob(ctx context.Context, pattern string) ([]string, error)

	// Stat describes the entry at path, following symbolic links inside the
	// root.
	Stat(ctx context.Context, path string) (FileInfo, error)

	// List returns the entries of the directory at path (following
	// links inside the root to reach it), sorted by name, without "."
	// and "..", and never descending. Each entry is described as Stat
	// would, except that a symbolic link is reported as one (Link).
	// More than MaxGlobResults entries is ErrTooLarge.
	List(ctx context.Context, path string) ([]FileInfo, error)

	// Mkdir creates the directory at path and any missing parents. An
	// existing directory is no error; an existing file there is
	// ErrNotDir.
	Mkdir(ctx context.Context, path string) error

	// Remove deletes the entry at path: a file, a symbolic link (never
	// what it points to) or an empty directory; a directory with entries
	// only when recursive, with everything below it (links inside are
	// removed, never followed). The root itself is never removed
	// (ErrInvalidPath). A missing path is ErrNotFound.
	Remove(ctx context.Context, path string, recursive bool) error

	// Rename moves the entry at from to to, atomically, creating the
	// missing parents of to. A symbolic link is moved as a link. An
	// existing file (or link) at to is replaced; an existing directory
	// at to is ErrIsDir, never merged or replaced. Neither path may be
	// the root, and a directory cannot move below itself
	// (ErrInvalidPath).
	Rename(ctx context.Context, from, to string) error

	// Exec runs a command and waits for it. err is non-nil only when the
	// command could not be run at all (bad Command, unsupported tier, closed
	// sandbox, cancelled context); everything the command itself did — exit
	// status, signal, timeout — is in the Result.
	Exec(ctx context.Context, cmd Command) (Result, error)

	// Supports reports whether the tier can do c. An unknown capability is
	// not supported.
	Supports(c Feature) bool

	// Instructions is a short plain-text description of where tools act,
	// meant for a model's system prompt. Empty when there is nothing to say.
	Instructions() string

	// Close releases everything the sandbox holds. It is idempotent.
	Close() error
}

// Limits that keep a single operation from exhausting hutch's memory.
const (
	// MaxFileSize is the largest file Read returns.
	MaxFileSize = 256 << 20
	// MaxGlobResults is the largest number of matches Glob returns.
	MaxGlobResults = 100_000
	// MaxPathLen is the longest path, in bytes, any operation accepts.
	MaxPathLen = 4096
)

// StatReader is implemented by tiers that can read a file and describe it
// in one step (one path resolution, one open). The FileInfo describes the
// file as it was when opened, before its content was read; its Size is the
// whole file's even when max cut the content short.
type StatReader interface {
	// ReadStat returns at most max bytes from the start of the file (the
	// whole file, up to MaxFileSize, when max <= 0) and its description.
	ReadStat(ctx context.Context, path string, max int64) ([]byte, FileInfo, error)
}

// ReadStat reads at most max bytes of the file at path (all of it when
// max <= 0) and describes it: in one step when sb is a StatReader,
// otherwise Stat then Read (so the description is never newer than the
// content; without a StatReader the whole file is read and then cut).
func ReadStat(ctx context.Context, sb Sandbox, path string, max int64) ([]byte, FileInfo, error) {
	if sr, ok := sb.(StatReader); ok {
		return sr.ReadStat(ctx, path, max)
	}
	fi, err := sb.Stat(ctx, path)
	if err != nil {
		return nil, FileInfo{}, err
	}
	data, err := sb.Read(ctx, path)
	if max > 0 && int64(len(data)) > max {
		data = data[:max]
	}
	return data, fi, err
}

// Streamer is implemented by tiers that can hand a file's content over as
// it is read, never whole in memory (a line window of a large log needs
// no more than the window).
type Streamer interface {
	// ReadStream calls fn with a reader of the file at path, with the
	// checks and errors of ReadStat; fn may stop reading early. The
	// description is of the file as it was opened. An error from fn is
	// returned unless reading the file failed.
	ReadStream(ctx context.Context, path string, fn func(io.Reader) error) (FileInfo, error)
}

// ReadStream streams the file at path to fn when sb is a Streamer;
// otherwise it reads the file whole (ReadStat) and hands fn a reader of
// that.
func ReadStream(ctx context.Context, sb Sandbox, path string, fn func(io.Reader) error) (FileInfo, error) {
	if st, ok := sb.(Streamer); ok {
		return st.ReadStream(ctx, path, fn)
	}
	data, fi, err := ReadStat(ctx, sb, path, 0)
	if err != nil {
		return FileInfo{}, err
	}
	return fi, fn(bytes.NewReader(data))
}

// Packer is implemented by tiers that move a whole tree of regular files
// in one operation, where the files are (the remote tier's bulk copies use
// it on the server). The stream is a tar stream whose headers are the
// manifest: names relative to dir, sizes, permission bits, modification
// times.
type Packer interface {
	// Pack writes the regular files under dir (a directory; "." the
	// root) changed after since (all when zero) to w. Links to files
	// inside the root are packed as files; what leads out is not.
	Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error
	// Unpack writes the directories and regular files of r below dir,
	// each file as Write does (atomically; a new file 0644, an existing
	// one keeping its mode), and says how many files it wrote. An entry
	// that is neither, or whose name leads out of dir, stops it with an
	// error naming the entry; the files written before it stay.
	Unpack(ctx context.Context, dir string, r io.Reader) (int, error)
}

// Scoper is implemented by tiers whose Root alone does not say what a call
// reaches (the container tier: an image, binds and an engine; the isolated
// tier: a policy). Scope names all of it, so an approval given for a call
// in one sandbox never covers the same call in another sandbox that shares
// the approval store. Two sandboxes with the same Scope reach the same
// things.
type Scoper interface {
	Scope() string
}

// InMemory is implemented by tiers whose files exist only in hutch's memory
// (the virtual tier): nothing outside hutch can change them, so guards
// against external changes (read-before-write) may be skipped.
type InMemory interface {
	InMemory()
}
