//go:build linux && !amd64

package sysprog

// threadPointer is 0 where Go code keeps its goroutine register across
// calls into assembly and never reloads it from thread-local storage.
func threadPointer() (uintptr, bool) { return 0, false }
