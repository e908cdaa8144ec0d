package testenv

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Programs and programs: the two ways a test re-executes its own test
// binary.
//
//   - A program is a named function the binary runs instead of its
//     tests (an attacker started inside a sandbox, a server a test
//     kills). A package registers its programs with RegisterProgram from
//     an init function and calls RunProgram first in its TestMain;
//     ProgramArgv and ProgramEnv say how to start one.
//   - A program is one test run again in another process, after setup or
//     in another world (another mount namespace): InChild and InChildVia.

const (
	programEnv = "HUTCH_TEST_PROGRAM"
	// programMark ends the test binary's own arguments in a program's
	// argv: it runs no test should the program's name be unknown.
	programMark = "-test.run=^$"
)

var programs = map[string]func(args []string){}

// RegisterProgram names fn as a program of this test binary; fn gets the
// arguments ProgramArgv was given. Call it from an init function; a name
// registered twice panics there (a programming error in a test).
func RegisterProgram(name string, fn func(args []string)) {
	if _, dup := programs[name]; dup {
		panic("testenv: program " + name + " registered twice")
	}
	programs[name] = fn
}

// RunProgram runs the program this process was started as (ProgramEnv),
// then exits with status 0 (a program may exit otherwise itself); when
// this process is no program it returns at once. An unknown name exits with
// status 2, naming the programs there are. Call it first in TestMain,
// after every init has registered its programs.
func RunProgram() {
	name, ok := os.LookupEnv(programEnv)
	if !ok {
		return
	}
	fn := programs[name]
	if fn == nil {
		names := make([]string, 0, len(programs))
		for n := range programs {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "testenv: no program %q in this test binary (there are: %s)\n", name, strings.Join(names, ", "))
		os.Exit(2)
	}
	var args []string
	for i, a := range os.Args {
		if a == programMark {
			args = os.Args[i+1:]
			break
		}
	}
	fn(args)
	os.Exit(0)
}

// ProgramArgv is the argv that starts this test binary as a program with
// args; which program, ProgramEnv in its environment says.
func ProgramArgv(args ...string) []string {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return append([]string{self, programMark}, args...)
}

// ProgramEnv is the environment entry ("KEY=value") that makes a process
// started with ProgramArgv run program name; ProgramEnvKey and name are
// its two halves, for an environment given as a map.
func ProgramEnv(name string) string { return programEnv + "=" + name }

// ProgramEnvKey is the variable ProgramEnv sets.
const ProgramEnvKey = programEnv
