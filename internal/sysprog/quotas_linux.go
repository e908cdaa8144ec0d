package sysprog

import (
	"strconv"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
	"golang.org/x/sys/unix"
)

// quotas appends setting the sandbox's user namespace's maxima (q's
// sysctls), run while the process still has its capabilities in that
// namespace. A count this kernel does not have is passed over.
func (b *builder) quotas(q wire.Quotas) {
	for _, name := range boundary.QuotaSysctls {
		n, ok := q.Sysctls[name]
		if !ok {
			continue
		}
		start := b.mark()
		b.writeFile("/proc/sys/user/"+name, strconv.AppendInt(nil, n, 10), 0)
		b.skipTo(start, unix.ENOENT)
	}
}
