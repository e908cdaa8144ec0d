package session

import (
	"os"
	"sync"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
)

// inheritedGroup are this helper's own CmdGroupFD and CountFD, as files
// made once (a file collected by the GC would close its descriptor).
var inheritedGroup = sync.OnceValue(func() [2]*os.File {
	return [2]*os.File{os.NewFile(boundary.CmdGroupFD, "hutch-cmd-group"), os.NewFile(boundary.CountFD, "hutch-cmd-count")}
})

// groupExtraFiles hands a child helper (runner, exec helper) this helper's
// group files, when the job has a command group (see CommandGroup.ExtraFiles).
func groupExtraFiles(job wire.Job, extra []*os.File) []*os.File {
	if !job.CmdGroup {
		return extra
	}
	g := inheritedGroup()
	return boundary.PlaceGroupFiles(extra, g[0], g[1])
}
