// Package containerhelper holds the container tier's helper: hutch's own
// static binary, mounted read-only into the container and started with
// the argv[0] base name boundary.ContainerHelperName. [Main] runs the
// role its arguments name: the container's idle PID 1 (init), the stream
// server of a session (serve ROOT, speaking the frame protocol of package
// wire over stdin and stdout and serving files through package hostfs),
// or the reaper that serve starts to run commands one at a time.
package containerhelper
