package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
)

// A narrowing never widens: every request for more than the base allows
// is refused naming the setting, and what it grants is at most the base.
func TestNarrowNeverWidens(t *testing.T) {
	base := policy.Default().Extend(policy.Policy{Write: []string{"/srv/work"}, Read: []string{"/srv/data"},
		Hosts: []string{"example.com", "*.go.dev"}, Timeout: time.Minute,
		Limits: policy.Limits{Memory: 1 << 30, Processes: 100, CPUTime: time.Minute}})
	for _, c := range []struct {
		name string
		n    policy.Narrowing
		want string // the refusal's words; "" when granted
		is   error
	}{
		{"nothing", policy.Narrowing{}, "", nil},
		{"write a subdirectory", policy.Narrowing{Write: []string{"/srv/work/sub"}}, "", nil},
		{"write outside", policy.Narrowing{Write: []string{"/srv/data"}}, "write /srv/data", policy.ErrWiden},
		{"write via ..", policy.Narrowing{Write: []string{"/srv/work/../data"}}, "write /srv/data", policy.ErrWiden},
		{"write the whole host", policy.Narrowing{Write: []string{"/"}}, "write /", policy.ErrWiden},
		{"read a denied file", policy.Narrowing{Read: []string{"/etc/shadow"}}, "read /etc/shadow", policy.ErrWiden},
		{"read home", policy.Narrowing{Read: []string{"/root"}}, "read /root", policy.ErrWiden},
		{"read less", policy.Narrowing{Read: []string{"/usr", "/srv/data"}}, "", nil},
		{"relative path", policy.Narrowing{Write: []string{"work"}}, "not absolute", policy.ErrConfig},
		{"deny more", policy.Narrowing{Deny: []string{"/srv/work/secret"}}, "", nil},
		{"no network", policy.Narrowing{Network: policy.NetworkNone}, "", nil},
		{"fewer hosts", policy.Narrowing{Hosts: []string{"example.com"}}, "", nil},
		{"another host", policy.Narrowing{Hosts: []string{"evil.example"}}, `host "evil.example"`, policy.ErrWiden},
		{"all network", policy.Narrowing{Network: policy.NetworkAll}, "network all", policy.ErrWiden},
		{"shorter timeout", policy.Narrowing{Timeout: time.Second}, "", nil},
		{"longer timeout", policy.Narrowing{Timeout: time.Hour}, "timeout 1h0m0s", policy.ErrWiden},
		{"less memory", policy.Narrowing{Limits: policy.Limits{Memory: 64 << 20}}, "", nil},
		{"more memory", policy.Narrowing{Limits: policy.Limits{Memory: 2 << 30}}, "memory", policy.ErrWiden},
		{"more processes", policy.Narrowing{Limits: policy.Limits{Processes: 1000}}, "processes", policy.ErrWiden},
		{"unlimited processes", policy.Narrowing{Limits: policy.Limits{Processes: policy.Unlimited}}, "unlimited", policy.ErrConfig},
		{"a file size where the base has none", policy.Narrowing{Limits: policy.Limits{FileSize: 1 << 20}}, "", nil},
		{"protect more", policy.Narrowing{Protect: []string{".env", "Makefile"}}, "", nil},
		{"unprotect a default entry", policy.Narrowing{Unprotect: []string{".vscode"}}, "unprotect .vscode", policy.ErrWiden},
		{"unprotect a directory holding protected ones", policy.Narrowing{Unprotect: []string{".git"}}, "unprotect .git", policy.ErrWiden},
		{"protect outside the writable paths", policy.Narrowing{Protect: []string{"../x"}}, "not below", policy.ErrConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := base.Narrow(c.n)
			if c.want != "" {
				if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Narrow: %v, want %v naming %q", err, c.is, c.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Narrow: %v", err)
			}
			norm, _ := base.Normalize("/")
			within(t, norm, got)
		})
	}
}

// within fails unless got allows no more than base: every path it reads
// or writes base does too, the network is no wider, limits no higher.
func within(t *testing.T, base, got policy.Policy) {
	t.Helper()
	for _, p := range append(got.Read, got.Write...) {
		if !base.CanRead(p) {
			t.Errorf("grants reading %s, which the base does not", p)
		}
	}
	for _, p := range got.Write {
		if !base.CanWrite(p) {
			t.Errorf("grants writing %s, which the base does not", p)
		}
	}
	for _, p := range base.Deny {
		if got.CanRead(p) {
			t.Errorf("drops the base's deny of %s", p)
		}
	}
	for _, e := range base.Protected() {
		if !slices.Contains(got.Protected(), e) {
			t.Errorf("drops the base's protection of %s", e)
		}
	}
	if base.Network == policy.NetworkNone && got.Network != policy.NetworkNone || base.Network == policy.NetworkAllow && got.Network == policy.NetworkAll {
		t.Errorf("network %s over the base's %s", got.Network, base.Network)
	}
	if got.Timeout > base.Timeout {
		t.Errorf("timeout %v over %v", got.Timeout, base.Timeout)
	}
	if got.Limits.Memory > base.Limits.Memory || got.Limits.Processes > base.Limits.Processes || got.Limits.CPUTime > base.Limits.CPUTime {
		t.Errorf("limits %+v over %+v", got.Limits, base.Limits)
	}
}

// Whatever paths a client sends, a granted narrowing stays within the
// base.
func FuzzNarrow(f *testing.F) {
	f.Add("/srv/work/sub", "/usr", "/srv/work/x")
	f.Add("/srv/work/../data", "/etc/shadow", "")
	f.Add("/srv/work/./a//b", "/srv//data/", "/srv/work")
	f.Add("/srv/work\x00/x", "/", "/etc")
	base := policy.Default().Extend(policy.Policy{Write: []string{"/srv/work"}, Read: []string{"/srv/data"}})
	norm, err := base.Normalize("/")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, write, read, deny string) {
		got, err := base.Narrow(policy.Narrowing{Write: []string{write}, Read: []string{read}, Deny: []string{deny}})
		if err != nil {
			if !errors.Is(err, policy.ErrWiden) && !errors.Is(err, policy.ErrConfig) {
				t.Fatalf("Narrow: untyped error %v", err)
			}
			return
		}
		within(t, norm, got)
	})
}

// A narrowing's Protect wins over the base's Unprotect: a client may
// protect again what the server's policy left open, never the reverse.
func TestNarrowProtectsWhatTheBaseUnprotected(t *testing.T) {
	base := policy.Default().Extend(policy.Policy{Write: []string{"/srv/work"}, Unprotect: []string{".vscode"}})
	if slices.Contains(base.Protected(), ".vscode") {
		t.Fatalf("base protects .vscode: %v", base.Protected())
	}
	got, err := base.Narrow(policy.Narrowing{Protect: []string{".vscode/"}, Unprotect: []string{".vscode"}})
	if err != nil {
		t.Fatalf("Narrow: %v", err)
	}
	if !slices.Contains(got.Protected(), ".vscode") {
		t.Errorf("narrowed policy does not protect .vscode: %v", got.Protected())
	}
}
