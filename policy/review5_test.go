package policy_test

// Review 5: attacks on the policy package's input surfaces (Load,
// ParseSize, Normalize, Summary). Each test fails while its defect is
// present; the ones marked "holds" are attacks that did not get through.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

func review5File(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A second YAML document is silently ignored: its deny list never reaches
// the policy. (mcpserver.LoadSettings refuses trailing documents; Load
// does not.)
func TestReview5LoadRejectsTrailingDocuments(t *testing.T) {
	p := review5File(t, "p.yaml", "read: [/data]\n---\ndeny: [/data/secret]\n")
	pol, err := policy.Load(p)
	if err == nil {
		t.Fatalf("Load accepted two YAML documents and dropped the second one's deny list: Deny=%q", pol.Deny)
	}
	if !errors.Is(err, sandbox.ErrConfig) {
		t.Errorf("error %v does not match ErrConfig", err)
	}
}

// YAML reads a bare ~ (or null) as null, and yaml.v3 silently drops null
// elements of a list: "deny: [~]" (meant as "hide my home") denies nothing.
func TestReview5LoadNullListEntryIsAnError(t *testing.T) {
	for _, body := range []string{"read: [/home]\ndeny: [~]\n", "read: [/home]\ndeny: [null, /home/x]\n", "read: [~]\n"} {
		pol, err := policy.Load(review5File(t, "p.yaml", body))
		if err == nil {
			t.Errorf("%q: accepted; the null entry was dropped (Read=%q Deny=%q)", body, pol.Read, pol.Deny)
		}
	}
}

// hutch never expands ~, so "~/.ssh" in a policy file (or --deny=~/.ssh,
// which the shell does not expand either) becomes DIR/~/.ssh, a path that
// does not exist: the deny silently protects nothing.
func TestReview5TildePathIsAnError(t *testing.T) {
	pol, err := policy.Load(review5File(t, "p.yaml", "read: [/home/me]\ndeny: [~/.ssh]\n"))
	if err == nil {
		t.Errorf("deny ~/.ssh accepted as %q", pol.Deny[len(pol.Deny)-1])
	}
	if _, err := (policy.Policy{Read: []string{"/home/me"}, Deny: []string{"~/.ssh"}}).Normalize("/work"); err == nil {
		t.Errorf("Normalize accepted deny ~/.ssh (it means /work/~/.ssh)")
	}
}

// Extend with network all (or none) clears DenyHosts, including the new
// layer's own: {Network: all, DenyHosts: [evil.com]} normalizes to the
// whole network with no deny list, instead of the "network all with host
// entries" error a policy file gets.
func TestReview5ExtendNetworkAllKeepsOwnDenyForValidation(t *testing.T) {
	for _, n := range []policy.Network{policy.NetworkAll, policy.NetworkNone} {
		p := policy.Default().Extend(policy.Policy{Network: n, DenyHosts: []string{"evil.com"}})
		if got, err := p.Normalize("/"); err == nil {
			t.Errorf("network %s with deny evil.com normalized to network %s, DenyHosts %q: the deny was dropped", n, got.Network, got.DenyHosts)
		}
	}
}

// A byte count below 1 parses to 0, which means "no limit": --memory 0.5
// or "file_size: 0.9" silently remove the limit instead of failing.
func TestReview5FractionalSizeIsNotNoLimit(t *testing.T) {
	for _, in := range []string{"0.5", "0.99", "0.9b", "0x1p-2"} {
		if v, err := policy.ParseSize(in); err == nil && v == 0 {
			t.Errorf("ParseSize(%q) = 0 (no limit), nil; want an error", in)
		}
	}
	pol, err := policy.Load(review5File(t, "p.yaml", "limits: {memory: 0.5, file_size: 0.9}\n"))
	if err == nil && (pol.Limits.Memory == 0 || pol.Limits.FileSize == 0) {
		t.Errorf("limits 0.5 and 0.9 loaded as no limit: %+v", pol.Limits)
	}
}

// ParseSize("nan") returns a negative Size and no error; the caller's
// later message ("limits must not be negative") does not name the input.
func TestReview5ParseSizeNaN(t *testing.T) {
	for _, in := range []string{"nan", "NaN", "nanK"} {
		if v, err := policy.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error naming %q", in, v, in)
		}
	}
}

// yaml.v3 truncates a float into an int field: "nice: 1.5" becomes 1,
// "processes: 64.7" becomes 64, without a word.
func TestReview5LoadFractionalIntegers(t *testing.T) {
	for _, body := range []string{"nice: 1.5\n", "limits: {processes: 64.7}\n", "limits: {open_files: 10.5}\n"} {
		pol, err := policy.Load(review5File(t, "p.yaml", body))
		if err == nil {
			t.Errorf("%q: accepted as nice %d, limits %+v", body, pol.Nice, pol.Limits)
		}
	}
}

// Process and open-file limits no kernel accepts pass Normalize; the
// sandbox then fails with a misleading reason ("a process limit needs a
// pids cgroup here ... invalid argument" — the host is blamed for a typo;
// "open files limit: operation not permitted").
func TestReview5NormalizeBoundsHugeLimits(t *testing.T) {
	for _, l := range []policy.Limits{{Processes: 99999999999}, {OpenFiles: 99999999999}, {Processes: 1<<22 + 1}, {OpenFiles: 1<<20 + 1}} {
		if _, err := (policy.Policy{Limits: l}).Normalize("/"); err == nil {
			t.Errorf("Normalize accepted %+v; want an error naming the largest value", l)
		}
	}
	// Too small to start a command, and the bounds themselves (accepted).
	for _, c := range []struct {
		l  policy.Limits
		ok bool
	}{
		{policy.Limits{Processes: 3}, false}, {policy.Limits{OpenFiles: 15}, false},
		{policy.Limits{Processes: 4}, true}, {policy.Limits{OpenFiles: 16}, true},
		{policy.Limits{Processes: 1 << 22}, true}, {policy.Limits{OpenFiles: 1 << 20}, true},
	} {
		_, err := (policy.Policy{Limits: c.l}).Normalize("/")
		if (err == nil) != c.ok {
			t.Errorf("Normalize(%+v): %v, want accepted %v", c.l, err, c.ok)
		}
	}
}

// A policy file larger than 1 MiB is refused before it is parsed; one of
// exactly 1 MiB is read.
func TestLoadSizeBound(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		size int
		ok   bool
	}{{1 << 20, true}, {1<<20 + 1, false}} {
		p := filepath.Join(dir, "p.yaml")
		body := "read: [/opt]\n" + strings.Repeat("#", c.size-len("read: [/opt]\n"))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := policy.Load(p)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "larger than")) {
			t.Errorf("a %d-byte file: %v, want accepted %v", c.size, err, c.ok)
		}
	}
}

// The kernel counts CPU time in whole seconds and hutch rounds up (1500ms
// is enforced as 2 s), but Summary truncates and says "1 seconds".
func TestReview5SummaryCPUTimeMatchesEnforcement(t *testing.T) {
	s := policy.Policy{Limits: policy.Limits{CPUTime: 1500 * time.Millisecond}}.Summary()
	if strings.Contains(s, "CPU time limit 1 seconds") {
		t.Errorf("Summary %q understates the enforced limit (2 s)", s)
	}
}

// A policy file that is a FIFO (or /dev/zero) is read without a bound:
// Load blocks forever (and hutch run then ignores SIGTERM), or reads
// until the process runs out of memory. It should refuse anything but a
// regular file of sane size.
func TestReview5LoadRefusesNonRegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "p.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := policy.Load(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Load(FIFO) succeeded")
		}
	case <-time.After(2 * time.Second):
		t.Errorf("Load(FIFO) blocks instead of refusing a non-regular file")
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // unblock it
			w.Close()
		}
		<-done
	}
}

// Holds: attacks on Load that got a clear error (or, for billion laughs,
// no blow-up).
func TestReview5LoadHolds(t *testing.T) {
	laughs := []string{`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]`}
	for i := 1; i < 10; i++ {
		laughs = append(laughs, "a"+string(rune('0'+i))+": &a"+string(rune('0'+i))+" ["+strings.Repeat("*a"+string(rune('0'+i-1))+",", 8)+"*a"+string(rune('0'+i-1))+"]")
	}
	for name, body := range map[string]string{
		"duplicate key":         "read: [/a]\nread: [/]\n",
		"paths not a list":      "read: /a\n",
		"duplicate network key": "network: {allow: [example.com], allow: [10.0.0.0/8]}\n",
		"billion laughs":        strings.Join(laughs, "\n") + "\nread: *a9\n",
		"network bad kind":      "network: [all]\n",
		"network unknown key":   "network: {allow: [example.com], alow: [x]}\n",
		"network merge key":     "network: {<<: {allow: [example.com]}}\n",
		"huge int":              "limits: {processes: 99999999999999999999}\n",
		"float size":            "limits: {memory: 5e8}\n",
		"negative size":         "limits: {memory: -5}\n",
		"bare number timeout":   "timeout: 30\n",
		"NUL in dir":            "dir: \"\\0x\"\n",
		"NUL in read":           "read: [\"/a\\0b\"]\n",
		"env name with =":       "env: {\"A=B\": c}\n",
		"sequence document":     "- a\n",
		"scalar document":       "hello\n",
	} {
		p := review5File(t, "p.yaml", body)
		pol, err := policy.Load(p)
		if err == nil {
			_, err = pol.Normalize(filepath.Dir(p))
		}
		if !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// FuzzParseSize: no input may parse to a negative size, or to 0 unless it
// writes zero; what parses round-trips through MarshalText.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "1.5G", "512MiB", " 8 M ", "10b", "0.5", "nan", "0x1p-2", "1_6M", "inf", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := policy.ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d: negative without an error", s, v)
		}
		if v == 0 && strings.ContainsAny(s, "123456789") && !strings.ContainsAny(strings.ToLower(s), "x") {
			t.Fatalf("ParseSize(%q) = 0 (no limit) for a nonzero number", s)
		}
		b, _ := v.MarshalText()
		if w, err := policy.ParseSize(string(b)); err != nil || w != v {
			t.Fatalf("ParseSize(%q) = %d; MarshalText %q reads back as %d, %v", s, v, b, w, err)
		}
	})
}

// FuzzLoad: no file may panic Load, and a file that loads never loses
// the default policy's denied secrets (a file only widens by adding
// paths; it cannot un-deny).
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"", "read: [/a]\n", "write: [.]\ndeny: [.git]\nnetwork: none\ntimeout: 5m\n",
		"network: {allow: [pypi.org, \"*.pythonhosted.org:443\"], deny: [evil.pypi.org]}\n",
		"limits: {memory: 512M, cpu_time: 60s, processes: 128, file_size: 1G, open_files: 256}\nnice: 10\n",
		"env: {A: b}\n", "network: &n {allow: [a.com]}\n", "read: [~]\n", "a\n---\nb\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body string) {
		if strings.Contains(body, "extends") {
			return // keep the fuzzer off the real filesystem
		}
		p := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		pol, err := policy.Load(p)
		if err != nil {
			if !errors.Is(err, sandbox.ErrConfig) {
				t.Fatalf("error %v does not match ErrConfig", err)
			}
			return
		}
		for _, s := range policy.SystemSecrets {
			if !slices.Contains(pol.Deny, s) {
				t.Fatalf("loaded policy lost the denied secret %s: %q", s, pol.Deny)
			}
		}
		_ = pol.Summary()
		_, _ = pol.Normalize(dir)
	})
}
