package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Run searches fsys as req says (see the package documentation for every
// rule). Errors: a bad request as Validate says; a Dir that does not exist
// matches sandbox.ErrNotFound; other failures to open Dir are the FS's
// (wrapped); a walk over budget matches sandbox.ErrTooLarge; a cancelled
// ctx is ctx's error.
func Run(ctx context.Context, fsys FS, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	req, m, err := prepare(req)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandbox.SearchResult{}, err
	}
	s := &searcher{ctx: ctx, fsys: fsys, req: req, m: m, sel: selector{pattern: req.Glob, baseOnly: !strings.Contains(req.Glob, "/")}}
	f, err := fsys.Open(req.Dir)
	if err != nil {
		return sandbox.SearchResult{}, pathError(req.Dir, err)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return sandbox.SearchResult{}, pathError(req.Dir, err)
	}
	c := s.newCollector()
	if !fi.IsDir() {
		// A file named by Dir is searched alone.
		j := &job{path: req.Dir, link: true}
		var sc scratch
		s.search(j, &sc)
		if err := c.add(j); err != nil {
			return sandbox.SearchResult{}, err
		}
		return c.result()
	}
	return s.walk(c)
}

// pathError wraps an FS error about p, making a missing path match
// sandbox.ErrNotFound.
func pathError(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, sandbox.ErrNotFound) {
		err = sandbox.ErrNotFound
	}
	return &fs.PathError{Op: "search", Path: p, Err: err}
}

// searcher is one search.
type searcher struct {
	ctx  context.Context
	fsys FS
	req  sandbox.SearchRequest
	m    *matcher // nil: no pattern
	sel  selector

	full  atomic.Bool // the result is full: workers only count
	bigMu sync.Mutex  // one large file in memory at a time
}

// batch is consecutive files of the walk, searched by one worker (one
// hand-off per file cost more than a small file's search), or (err) the
// walk's end in error.
type batch struct {
	jobs []*job
	err  error
	done chan struct{}
}

// batchSize is the most files in one batch.
const batchSize = 32

// job is one file to search, or (pre) a result the walker made itself.
type job struct {
	path string
	link bool // a symbolic link: must be opened to know it is a file
	pre  bool

	// The result.
	err      error
	isFile   bool // a regular file (false: left out silently)
	skipped  int
	searched bool
	read     int64
	matched  bool
	count    int // matching lines (count, content)
	matches  []sandbox.SearchMatch
}

// scratch is a worker's reusable buffers.
type scratch struct{ buf, low []byte }

// bigFile is the size above which a file is read under searcher.bigMu.
const bigFile = 16 << 20

// search fills j's result.
func (s *searcher) search(j *job, sc *scratch) {
	if err := s.ctx.Err(); err != nil {
		j.err = err
		return
	}
	if s.m == nil && !j.link {
		j.isFile, j.matched = true, true
		return
	}
	f, err := s.fsys.Open(j.path)
	if err != nil {
		if !j.link {
			j.isFile, j.skipped = true, 1
		}
		return // a link that dangles or leads out
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	j.isFile = true
	if s.m == nil {
		j.matched = true
		return
	}
	if fi.Size() > sandbox.MaxFileSize {
		j.skipped = 1
		return
	}
	buf := sc.buf
	if fi.Size() > bigFile {
		s.bigMu.Lock()
		defer s.bigMu.Unlock()
		buf = nil
	}
	buf, err = readAll(f, fi.Size(), buf)
	j.read = int64(len(buf))
	if fi.Size() <= bigFile && cap(buf) <= bigFile {
		sc.buf = buf
	}
	if err != nil || bytes.IndexByte(buf[:min(len(buf), 8000)], 0) >= 0 {
		j.skipped = 1
		return
	}
	j.searched = true
	var low []byte
	if s.m.fold {
		low = lowerASCII(sc.low, buf)
		if cap(low) <= bigFile {
			sc.low = low
		}
	}
	j.err = s.lines(j, buf, low)
}

// readAll reads f (of the given size, which may be stale) into buf,
// failing past sandbox.MaxFileSize.
func readAll(f fs.File, size int64, buf []byte) ([]byte, error) {
	if want := int(size) + 512; cap(buf) < want {
		buf = make([]byte, 0, max(want, 64<<10))
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > sandbox.MaxFileSize {
				return buf, sandbox.ErrTooLarge
			}
			buf = append(buf, 0)[:len(buf)]
		}
		want := cap(buf) - len(buf)
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == nil && n < want && size > 0 && int64(len(buf)) >= size {
			// A short read of a regular file is its end: this saves
			// the read that would say so, a system call per file.
			err = io.EOF
		}
		if err == io.EOF {
			if len(buf) > sandbox.MaxFileSize {
				return buf, sandbox.ErrTooLarge
			}
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// span is one matching line: its bytes and its number.
type span struct{ start, end, line int }

// lines finds j's matching lines in buf.
func (s *searcher) lines(j *job, buf, low []byte) error {
	only := s.full.Load() // the result is full: count (or just detect)
	mode := s.req.Mode
	if mode == sandbox.SearchFiles || (mode == sandbox.SearchCount && only) {
		return s.m.scan(s.ctx, buf, low, func(int, int) bool {
			j.matched, j.count = true, 1
			return false
		})
	}
	if mode == sandbox.SearchCount || only {
		err := s.m.scan(s.ctx, buf, low, func(int, int) bool {
			j.count++
			return true
		})
		j.matched = j.count > 0
		return err
	}
	// Content: keep the first Limit lines (and one more, whose line
	// number ends the last one's After), count the rest.
	var spans []span
	line, last := 1, 0
	err := s.m.scan(s.ctx, buf, low, func(start, end int) bool {
		j.count++
		if len(spans) <= s.req.Limit {
			line += bytes.Count(buf[last:start], []byte{'\n'})
			last = start
			spans = append(spans, span{start, end, line})
		}
		return true
	})
	if err != nil {
		return err
	}
	j.matched = j.count > 0
	size := 0
	shown := 0 // the last line shown (match or context)
	for k, sp := range spans {
		if k == s.req.Limit {
			break
		}
		mt := sandbox.SearchMatch{Path: j.path, Line: sp.line}
		text := buf[sp.start:sp.end]
		from := 0
		if len(text) > sandbox.MaxSearchLine {
			from = s.m.cutAt(text)
		}
		mt.Text = show(text, from)
		if c := s.req.Context; c > 0 {
			// Before: up to c lines, after the last one shown.
			pos := sp.start
			for n := sp.line - 1; n > shown && n >= sp.line-c && pos > 0; n-- {
				e := pos - 1
				b := bytes.LastIndexByte(buf[:e], '\n') + 1
				mt.Before = append(mt.Before, show(buf[b:e], 0))
				pos = b
			}
			slices.Reverse(mt.Before)
			// After: up to c lines, before the next match.
			next := int(^uint(0) >> 1)
			if k+1 < len(spans) {
				next = spans[k+1].line
			}
			pos = sp.end + 1
			for n := sp.line + 1; n < next && n <= sp.line+c && pos < len(buf); n++ {
				e := len(buf)
				if i := bytes.IndexByte(buf[pos:], '\n'); i >= 0 {
					e = pos + i
				}
				mt.After = append(mt.After, show(buf[pos:e], 0))
				pos = e + 1
			}
		}
		shown = sp.line + len(mt.After)
		size += matchSize(mt)
		if size > sandbox.MaxSearchBytes {
			break
		}
		j.matches = append(j.matches, mt)
	}
	return nil
}

// matchSize is the text a match adds to the result.
func matchSize(m sandbox.SearchMatch) int {
	n := len(m.Path) + len(m.Text)
	for _, l := range m.Before {
		n += len(l)
	}
	for _, l := range m.After {
		n += len(l)
	}
	return n
}

// errBudget is the walk running out of MaxWalkEntries.
var errBudget = errors.New("walk budget spent")

// collector merges the jobs' results, in path order.
type collector struct {
	s     *searcher
	res   sandbox.SearchResult
	size  int   // text bytes in res
	read  int64 // bytes read
	stop  bool  // nothing more is wanted
	limit int
}

func (s *searcher) newCollector() *collector {
	return &collector{s: s, limit: s.req.Limit}
}

func (c *collector) full() bool {
	return len(c.res.Matches)+len(c.res.Files) >= c.limit || c.s.full.Load()
}

// add merges j's result; an error is returned (with stop set) unless the
// result is already full and the error only means the walk (or reading)
// was over its budget.
func (c *collector) add(j *job) error {
	c.res.Skipped += j.skipped
	if j.err != nil {
		c.stop = true
		if c.s.ctx.Err() != nil {
			return c.s.ctx.Err()
		}
		if errors.Is(j.err, errBudget) {
			if c.full() {
				return nil
			}
			return fmt.Errorf("search %s: more than %d directory entries to walk: narrow dir or glob: %w", c.s.req.Dir, MaxWalkEntries, sandbox.ErrTooLarge)
		}
		return j.err
	}
	if j.searched {
		c.res.Searched++
	}
	c.read += j.read
	if j.matched {
		c.merge(j)
	}
	if c.full() {
		c.s.full.Store(true) // workers only count from now on
	}
	if c.full() && c.res.More >= moreFactor*c.limit {
		c.stop = true
	}
	if c.read > MaxReadBytes {
		c.stop = true
		if !c.full() {
			return fmt.Errorf("search %s: more than %d bytes to read: narrow dir or glob: %w", c.s.req.Dir, int64(MaxReadBytes), sandbox.ErrTooLarge)
		}
	}
	return nil
}

func (c *collector) merge(j *job) {
	if c.s.req.Mode != sandbox.SearchContent {
		f := sandbox.SearchFile{Path: j.path}
		if c.s.req.Mode == sandbox.SearchCount {
			f.Count = j.count
		}
		if c.full() || c.size+len(f.Path) > sandbox.MaxSearchBytes {
			c.s.full.Store(true)
			c.res.More++
			return
		}
		c.size += len(f.Path)
		c.res.Files = append(c.res.Files, f)
		return
	}
	took := 0
	for _, m := range j.matches {
		if c.full() || c.size+matchSize(m) > sandbox.MaxSearchBytes {
			c.s.full.Store(true)
			break
		}
		c.size += matchSize(m)
		c.res.Matches = append(c.res.Matches, m)
		took++
	}
	// The matches not taken, and those the job only counted.
	c.res.More += j.count - took
}

func (c *collector) result() (sandbox.SearchResult, error) {
	if err := c.s.ctx.Err(); err != nil {
		return sandbox.SearchResult{}, err
	}
	return c.res, nil
}

// walk runs the walker, the workers and the collector.
func (s *searcher) walk(c *collector) (sandbox.SearchResult, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	queue := make(chan *batch, 64) // in walk order, to the collector
	work := make(chan *batch, 8)   // to the workers
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var sc scratch
			for b := range work {
				for _, j := range b.jobs {
					if !j.pre {
						s.search(j, &sc)
					}
				}
				close(b.done)
			}
		})
	}
	w := &walker{s: s, ctx: ctx, queue: queue, work: work, budget: MaxWalkEntries}
	wg.Go(func() {
		defer close(work)
		defer close(queue)
		err := w.run()
		if w.flush() && err != nil {
			w.send(&batch{err: err})
		}
	})
	var err error
collect:
	for b := range queue {
		select {
		case <-b.done:
		case <-s.ctx.Done():
		}
		if err = s.ctx.Err(); err != nil {
			break
		}
		if b.err != nil {
			b.jobs = []*job{{err: b.err}}
		}
		for _, j := range b.jobs {
			if err = c.add(j); err != nil || c.stop {
				break collect
			}
		}
	}
	cancel()
	wg.Wait()
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	return c.result()
}

// walker lists the tree, in path order, and hands out the files to search.
type walker struct {
	s           *searcher
	ctx         context.Context
	queue, work chan *batch
	budget      int
	pending     []*job // the next batch
}

// add appends j to the next batch, sending it when full; false means the
// search is over.
func (w *walker) add(j *job) bool {
	w.pending = append(w.pending, j)
	if len(w.pending) < batchSize {
		return true
	}
	return w.flush()
}

// flush sends the pending batch, if any.
func (w *walker) flush() bool {
	if len(w.pending) == 0 {
		return true
	}
	b := &batch{jobs: w.pending}
	w.pending = nil
	return w.send(b)
}

// send queues b and hands it to a worker (an error needs none).
func (w *walker) send(b *batch) bool {
	b.done = make(chan struct{})
	if b.err != nil {
		close(b.done)
	}
	select {
	case w.queue <- b:
	case <-w.ctx.Done():
		return false
	}
	if b.err == nil {
		select {
		case w.work <- b:
		case <-w.ctx.Done():
			close(b.done) // the collector stopped waiting, or will see ctx
			return false
		}
	}
	return true
}

func (w *walker) spend(n int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.budget -= n; w.budget < 0 {
		return errBudget
	}
	return nil
}

// readDir lists dir, sorted so that the walk visits paths in byte order:
// a directory sorts as its name with "/" appended.
func (w *walker) readDir(dir string) ([]fs.DirEntry, error) {
	if err := w.spend(1); err != nil {
		return nil, err
	}
	ents, err := w.s.fsys.ReadDir(dir)
	if err != nil && len(ents) == 0 {
		return nil, err
	}
	if err := w.spend(len(ents)); err != nil {
		return nil, err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(key(a), key(b)) })
	return ents, nil
}

// key is an entry's sort key: its name, with "/" appended for a directory.
func key(e fs.DirEntry) string {
	if e.Type().IsDir() {
		return e.Name() + "/"
	}
	return e.Name()
}

// has reports whether ents, sorted by key, has an entry of key k.
func has(ents []fs.DirEntry, k string) bool {
	_, ok := slices.BinarySearchFunc(ents, k, func(e fs.DirEntry, k string) int { return strings.Compare(key(e), k) })
	return ok
}

// readIgnore reads the ignore file at p, if it is a regular file of at
// most MaxIgnoreFile bytes.
func (w *walker) readIgnore(p, dir string) (*ignoreFile, error) {
	if err := w.spend(1); err != nil {
		return nil, err
	}
	f, err := w.s.fsys.Open(p)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxIgnoreFile {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxIgnoreFile+1))
	if err != nil || len(data) > MaxIgnoreFile {
		return nil, nil
	}
	return parseIgnore(dir, data), nil
}

// dirIgnore pushes dir's .gitignore, if ents (its listing) has one that
// is a regular file.
func (w *walker) dirIgnore(ign *ignores, dir string, ents []fs.DirEntry) (*ignores, error) {
	if w.s.req.IncludeIgnored {
		return ign, nil
	}
	i, ok := slices.BinarySearchFunc(ents, ".gitignore", func(e fs.DirEntry, k string) int { return strings.Compare(key(e), k) })
	if !ok || !ents[i].Type().IsRegular() {
		return ign, nil
	}
	rel := dir
	if dir == "." {
		rel = ""
	}
	f, err := w.readIgnore(join(dir, ".gitignore"), rel)
	if err != nil {
		return nil, err
	}
	return ign.push(f), nil
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// run walks from Dir (or from the glob's base below it).
func (w *walker) run() error {
	req := w.s.req
	var ign *ignores
	if !req.IncludeIgnored {
		f, err := w.readIgnore(".git/info/exclude", "")
		if err != nil {
			return err
		}
		ign = ign.push(f)
		// The .gitignore files of Dir's ancestors.
		if req.Dir != "." {
			elems := strings.Split(req.Dir, "/")
			for i := range elems {
				dir := strings.Join(elems[:i], "/")
				f, err := w.readIgnore(join(orRoot(dir), ".gitignore"), dir)
				if err != nil {
					return err
				}
				ign = ign.push(f)
			}
		}
	}
	start := req.Dir
	base := w.s.sel.base()
	switch {
	case base == "." || isUnder(start, base):
	case isUnder(base, start):
		// Walk down to the glob's base as the walk would: through real
		// directories, neither .git nor ignored ones.
		for _, name := range strings.Split(strings.TrimPrefix(base, prefix(start)), "/") {
			ents, err := w.readDir(start)
			if err != nil {
				if errors.Is(err, errBudget) || w.ctx.Err() != nil {
					return err
				}
				return nil
			}
			if ign, err = w.dirIgnore(ign, start, ents); err != nil {
				return err
			}
			next := join(start, name)
			if !has(ents, name+"/") || name == ".git" || (!req.IncludeIgnored && ign.ignored(next, true)) {
				return nil
			}
			start = next
		}
	default:
		return nil // the glob selects nothing under Dir
	}
	ents, err := w.readDir(start)
	if err != nil {
		if errors.Is(err, errBudget) || w.ctx.Err() != nil {
			return err
		}
		if start == req.Dir {
			return pathError(start, err)
		}
		return nil
	}
	return w.dir(start, ents, ign)
}

func orRoot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// prefix is dir as the start of the paths below it.
func prefix(dir string) string {
	if dir == "." {
		return ""
	}
	return dir + "/"
}

// isUnder reports whether p is dir or below it.
func isUnder(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// dir walks the directory dir, listed as ents.
func (w *walker) dir(dir string, ents []fs.DirEntry, ign *ignores) error {
	ign, err := w.dirIgnore(ign, dir, ents)
	if err != nil {
		return err
	}
	inc := w.s.req.IncludeIgnored
	for _, e := range ents {
		name := e.Name()
		if name == ".git" {
			continue
		}
		p := join(dir, name)
		switch t := e.Type(); {
		case t.IsDir():
			if !inc && ign.ignored(p, true) {
				continue
			}
			sub, err := w.readDir(p)
			if err != nil {
				if errors.Is(err, errBudget) || w.ctx.Err() != nil {
					return err
				}
				if !w.add(&job{pre: true, skipped: 1}) { // cannot be listed
					return w.ctx.Err()
				}
				continue
			}
			if err := w.dir(p, sub, ign); err != nil {
				return err
			}
		case t.IsRegular(), t&fs.ModeSymlink != 0:
			if !w.s.sel.match(p) || (!inc && ign.ignored(p, false)) {
				continue
			}
			if !w.add(&job{path: p, link: !t.IsRegular()}) {
				return w.ctx.Err()
			}
		}
	}
	return nil
}
