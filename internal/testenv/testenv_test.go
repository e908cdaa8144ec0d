package testenv_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// childEnv marks the re-executed test binary, which runs the test's
// subject instead of checking it.
const childEnv = "HUTCH_TESTENV_CHILD"

func TestInCI(t *testing.T) {
	for _, c := range []struct {
		val  string
		set  bool
		want bool
	}{
		{"true", true, true},
		{"", false, false},
		{"", true, false},
		{"false", true, false},
		{"1", true, false},
		{"TRUE", true, false},
	} {
		t.Setenv("CI", c.val) // restored when t ends
		if !c.set {
			os.Unsetenv("CI")
		}
		if got := testenv.InCI(); got != c.want {
			t.Errorf("CI=%q (set %v): InCI() = %v, want %v", c.val, c.set, got, c.want)
		}
	}
}

// TestMissing runs itself again in a child process: the child calls
// Missing, and the parent checks from the child's -test.v output that it
// failed under CI=true and skipped otherwise, with the message and the
// caller's line, and that Missing did not return.
func TestMissing(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		testenv.Missing(t, "component %s: %v", "X", errors.New("not found")) // missingLine
		t.Error("Missing returned")
		return
	}
	src, err := os.ReadFile("testenv_test.go")
	if err != nil {
		t.Fatal(err)
	}
	line := 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(l, "// missingLine") {
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatal("the call to Missing is not in testenv_test.go")
	}
	where := "testenv_test.go:" + strconv.Itoa(line) + ": "
	for _, c := range []struct {
		name    string
		ci      []string // CI's setting for the child; none unsets it
		failed  bool
		want    string
		notWant []string
	}{
		{"CI=true", []string{"CI=true"}, true,
			"--- FAIL: TestMissing",
			[]string{"--- SKIP", "--- PASS", "outside CI only"}},
		{"CI unset", nil, false,
			"--- SKIP: TestMissing",
			[]string{"--- FAIL", "--- PASS", "CI has every component"}},
		{"CI=false", []string{"CI=false"}, false,
			"--- SKIP: TestMissing",
			[]string{"--- FAIL", "--- PASS", "CI has every component"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMissing$", "-test.v", "-test.count=1")
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, childEnv+"=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, childEnv+"=1")
			cmd.Env = append(cmd.Env, c.ci...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case c.failed && !errors.As(err, &exit):
				t.Errorf("the child did not fail (err %v):\n%s", err, out)
			case !c.failed && err != nil:
				t.Errorf("the child failed: %v\n%s", err, out)
			}
			msg := "component X: not found (outside CI only)"
			if c.failed {
				msg = "CI has every component: component X: not found"
			}
			for _, w := range []string{c.want, where + msg} {
				if !strings.Contains(string(out), w) {
					t.Errorf("the child's output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range append(c.notWant, "Missing returned") {
				if strings.Contains(string(out), w) {
					t.Errorf("the child's output has %q:\n%s", w, out)
				}
			}
		})
	}
}

// InChild runs the test again after its setup: the child sees what the
// setup did, the parent does not run the body.
func TestInChild(t *testing.T) {
	if !testenv.InChild(t, "export HUTCH_TESTENV_SETUP=done") {
		if os.Getenv("HUTCH_TESTENV_SETUP") != "" {
			t.Fatal("the parent has the child's setup")
		}
		return
	}
	if got := os.Getenv("HUTCH_TESTENV_SETUP"); got != "done" {
		t.Fatalf("the child's setup did not run: HUTCH_TESTENV_SETUP=%q", got)
	}
}

func init() {
	testenv.RegisterProgram("echo-args", func(args []string) { fmt.Println(strings.Join(args, "|")) })
}

// A registered program runs, with its arguments, in place of the tests;
// an unknown one exits 2 naming those there are.
func TestProgramRunsInPlaceOfTheTests(t *testing.T) {
	c := exec.Command(testenv.ProgramArgv("a b", "-test.v", "c")[0], testenv.ProgramArgv("a b", "-test.v", "c")[1:]...)
	c.Env = append(os.Environ(), testenv.ProgramEnv("echo-args"))
	out, err := c.CombinedOutput()
	if err != nil || string(out) != "a b|-test.v|c\n" {
		t.Errorf("echo-args: %v %q", err, out)
	}
	c = exec.Command(testenv.ProgramArgv()[0])
	c.Env = append(os.Environ(), testenv.ProgramEnv("no-such"))
	out, err = c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `no program "no-such"`) || !strings.Contains(string(out), "echo-args") {
		t.Errorf("unknown program: %v %q", err, out)
	}
}

// InChildVia runs the test's child through the wrapper it is given.
func TestInChildViaWrapper(t *testing.T) {
	if !testenv.InChildVia(t, []string{"env", "HUTCH_TESTENV_WRAPPED=yes"}, "true") {
		return
	}
	if os.Getenv("HUTCH_TESTENV_WRAPPED") != "yes" {
		t.Fatal("the child did not run through the wrapper")
	}
}

func TestMain(m *testing.M) {
	testenv.RunProgram()
	os.Exit(m.Run())
}
