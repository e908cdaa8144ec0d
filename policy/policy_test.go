package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
)

func TestDefault(t *testing.T) {
	p, err := policy.Default().Normalize("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/usr/bin/env", "/etc/passwd", "/lib/x", "/bin/sh"} {
		if !p.CanRead(path) || p.CanWrite(path) {
			t.Errorf("default: %s read %v write %v; want read-only", path, p.CanRead(path), p.CanWrite(path))
		}
	}
	for _, path := range []string{"/root/.ssh/id_rsa", "/home/u", "/tmp/x", "/var/run", "/run/docker.sock", "/srv", "/opt/x", "/usrx", "/proc/1",
		"/etc/shadow", "/etc/gshadow", "/etc/sudoers.d/x", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssl/private/k.pem"} {
		if p.CanRead(path) {
			t.Errorf("default policy reads %s", path)
		}
	}
	if p.Network != policy.NetworkNone || p.Timeout != 120*time.Second || p.Dir != "/tmp" || len(p.Write) != 0 || p.Env != nil {
		t.Errorf("default = %+v", p)
	}
	want := "Starts in /tmp. Cannot change any host file (only a private /tmp). No network access. Memory limit " + policy.DefaultMemory().String() +
		". At most 1024 processes. Stops after 120 seconds."
	if s := p.Summary(); s != want {
		t.Errorf("Summary = %q, want %q", s, want)
	}
}

func TestSummary(t *testing.T) {
	p := policy.Default().Extend(policy.Policy{
		Write: []string{"/w"}, Read: []string{"/data"}, Deny: []string{"/w/.git"}, Timeout: 300 * time.Second,
		Limits: policy.Limits{Memory: 512 << 20, CPUTime: 30 * time.Second, Processes: 64, FileSize: 1 << 30, OpenFiles: 256}, Nice: 10,
	})
	p, err := p.Normalize("/")
	if err != nil {
		t.Fatal(err)
	}
	want := "Starts in /w. Can read /data. Can change /w. Cannot see /w/.git. No network access. Memory limit 512 MiB. " +
		"CPU time limit 30 seconds. At most 64 processes. Files up to 1 GiB. At most 256 open files per process. " +
		"Runs at lower priority (nice 10). Stops after 300 seconds."
	if s := p.Summary(); s != want {
		t.Errorf("Summary =\n%q\nwant\n%q", s, want)
	}
}

func TestDenyWinsAndPrefixes(t *testing.T) {
	p, err := policy.Policy{Read: []string{"/data"}, Write: []string{"/w"}, Deny: []string{"/w/secret", "/data/keys"}}.Normalize("/")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path        string
		read, write bool
	}{
		{"/w", true, true}, {"/w/a/b", true, true}, {"/wx", false, false}, {"/w/secret", false, false},
		{"/w/secret/x", false, false}, {"/w/secrets", true, true}, {"/data/x", true, false}, {"/data/keys/k", false, false},
	}
	for _, c := range cases {
		if p.CanRead(c.path) != c.read || p.CanWrite(c.path) != c.write {
			t.Errorf("%s: read %v write %v, want %v %v", c.path, p.CanRead(c.path), p.CanWrite(c.path), c.read, c.write)
		}
	}
}

func TestExtendWidens(t *testing.T) {
	narrow := policy.Default().Extend(policy.Policy{Write: []string{"/w"}, Limits: policy.Limits{Memory: 64 << 20}, Env: map[string]string{"A": "1"}})
	wide := narrow.Extend(policy.Policy{Write: []string{"/w", "/cache"}, Network: policy.NetworkAll, Timeout: time.Hour, Env: map[string]string{"B": "2"}})
	if !slices.Equal(wide.Write, []string{"/w", "/cache"}) || wide.Network != policy.NetworkAll || wide.Timeout != time.Hour ||
		wide.Limits.Memory != 64<<20 || wide.Env["A"] != "1" || wide.Env["B"] != "2" {
		t.Errorf("Extend = %+v", wide)
	}
	if len(narrow.Write) != 1 || narrow.Network != policy.NetworkNone || narrow.Env["B"] != "" {
		t.Errorf("Extend changed the narrower policy: %+v", narrow)
	}
}

func TestNormalizeErrors(t *testing.T) {
	for name, p := range map[string]policy.Policy{
		"network":         {Network: "some"},
		"negative":        {Timeout: -1},
		"neg limit":       {Limits: policy.Limits{Processes: -2}}, // -1 is Unlimited
		"tiny memory":     {Limits: policy.Limits{Memory: 1 << 20}},
		"sub-second cpu":  {Limits: policy.Limits{CPUTime: 500 * time.Millisecond}},
		"nice":            {Nice: 20},
		"negative nice":   {Nice: -5},
		"nul":             {Read: []string{"/a\x00b"}},
		"deny not utf-8":  {Deny: []string{"/w/secret\xff"}}, // JSON would make it another path
		"dir not utf-8":   {Write: []string{"/w"}, Dir: "/w/\xfe"},
		"env not utf-8":   {Env: map[string]string{"A": "\xff"}},
		"empty path":      {Write: []string{""}},
		"dir unreadable":  {Dir: "/home/me"},
		"bad env":         {Env: map[string]string{"A=B": "x"}},
		"relative no cwd": {Read: []string{"rel"}},
		"read the root":   {Read: []string{"/"}},
		"write the root":  {Write: []string{"/"}},
	} {
		cwd := "/"
		if name == "relative no cwd" {
			cwd = ""
		}
		if _, err := p.Normalize(cwd); !errors.Is(err, policy.ErrConfig) {
			t.Errorf("%s: %v, want policy.ErrConfig", name, err)
		}
	}
	p, err := policy.Policy{Write: []string{"w/../w2", "./x"}}.Normalize("/home/me")
	if err != nil || !slices.Equal(p.Write, []string{"/home/me/w2", "/home/me/x"}) || p.Dir != "/home/me/w2" {
		t.Errorf("relative paths: %+v %v", p, err)
	}
}

func TestLoad(t *testing.T) {
	write := fileWriter(t)
	base := write("base.yaml", "write: [work]\nlimits:\n  memory: 256M\n")
	p, err := policy.Load(write("p.yaml", `extends: base.yaml
read: [/data]
deny: [work/.git]
network: all
dir: work
timeout: 5m
nice: 5
limits:
  cpu_time: 10s
  processes: 32
  file_size: 1G
  open_files: 128
env:
  LANG: C.UTF-8
`))
	if err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(filepath.Dir(base), "work")
	if !slices.Contains(p.Read, "/usr") || !slices.Contains(p.Read, "/data") || !slices.Equal(p.Write, []string{w}) ||
		!slices.Equal(p.Deny, append(slices.Clone(policy.SystemSecrets), filepath.Join(w, ".git"))) || p.Network != policy.NetworkAll || p.Dir != w ||
		p.Timeout != 5*time.Minute || p.Nice != 5 || p.Limits.Memory != 256<<20 || p.Limits.CPUTime != 10*time.Second ||
		p.Limits.Processes != 32 || p.Limits.FileSize != 1<<30 || p.Limits.OpenFiles != 128 || p.Env["LANG"] != "C.UTF-8" {
		t.Errorf("Load = %+v", p)
	}
	for name, body := range map[string]string{
		"unknown key":    "writ: [/w]\n",
		"bad size":       "limits: {memory: lots}\n",
		"bad duration":   "timeout: soon\n",
		"bad type":       "write: /w\n",
		"missing parent": "extends: nope.yaml\n",
		"self loop":      "extends: loop.yaml\n",
	} {
		file := strings.ReplaceAll(name, " ", "_") + ".yaml"
		if name == "self loop" {
			file = "loop.yaml"
		}
		if _, err := policy.Load(write(file, body)); !errors.Is(err, policy.ErrConfig) {
			t.Errorf("%s: %v, want policy.ErrConfig", name, err)
		}
	}
}

// Network allow-lists: composed by Extend, checked with the proxy's own
// parser, read from files in either form, named in the summary.
func TestNetworkAllow(t *testing.T) {
	p := policy.Default().Extend(policy.Policy{Hosts: []string{"pypi.org", "*.github.com:443"}})
	if p.Network != policy.NetworkAllow {
		t.Fatalf("listing hosts gives network %q, want allow", p.Network)
	}
	p = p.Extend(policy.Policy{Hosts: []string{"files.pythonhosted.org"}, DenyHosts: []string{"gist.github.com"}})
	n, err := p.Normalize("/")
	if err != nil || !slices.Equal(n.Hosts, []string{"pypi.org", "*.github.com:443", "files.pythonhosted.org"}) ||
		!slices.Equal(n.DenyHosts, []string{"gist.github.com"}) {
		t.Fatalf("composed: %+v %v", n, err)
	}
	want := "Network access only to pypi.org, *.github.com:443, files.pythonhosted.org, through hutch's proxy (HTTP, HTTPS and SOCKS5). Never to gist.github.com."
	if s := n.Summary(); !strings.Contains(s, want) {
		t.Errorf("summary %q lacks %q", s, want)
	}
	if all := p.Extend(policy.Policy{Network: policy.NetworkAll}); all.Network != policy.NetworkAll || all.Hosts != nil || all.DenyHosts != nil {
		t.Errorf("an explicit all keeps the allow-list: %+v", all)
	}
	for name, q := range map[string]policy.Policy{
		"wildcard suffix": {Hosts: []string{"*.com"}},
		"star":            {Hosts: []string{"*"}},
		"scheme":          {Hosts: []string{"https://pypi.org"}},
		"bad deny":        {Hosts: []string{"pypi.org"}, DenyHosts: []string{"a/b"}},
		"none with hosts": {Network: policy.NetworkNone, Hosts: []string{"pypi.org"}},
		"all with deny":   {Network: policy.NetworkAll, DenyHosts: []string{"pypi.org"}},
		"allow no hosts":  {Network: policy.NetworkAllow},
	} {
		if _, err := q.Normalize("/"); !errors.Is(err, policy.ErrConfig) {
			t.Errorf("%s: %v, want policy.ErrConfig", name, err)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "net.yaml")
	for body, want := range map[string][]string{
		"network:\n  allow: [pypi.org, '*.github.com']\n  deny: [gist.github.com]\n": {"pypi.org", "*.github.com"},
		"network: none\n": nil,
	} {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := policy.Load(file)
		if err != nil || !slices.Equal(p.Hosts, want) {
			t.Errorf("%q: %+v %v", body, p.Hosts, err)
		}
	}
	for _, body := range []string{"network:\n  allow: [pypi.org]\n  allwo: [x]\n", "network: [pypi.org]\n"} {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.Load(file); !errors.Is(err, policy.ErrConfig) {
			t.Errorf("%q: %v, want policy.ErrConfig", body, err)
		}
	}
}

// The default policy bounds processes and memory: a fork bomb or a
// runaway allocation under it stops at hutch's limits, not the host's. A
// policy file (which extends the default) and a Summary say so too.
func TestDefaultPolicyBoundsProcessesAndMemory(t *testing.T) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	half := policy.Size(uint64(si.Totalram)*uint64(si.Unit)/2) &^ (1<<20 - 1)
	wantMemory := min(half, 8<<30)
	if policy.DefaultProcesses != 1024 || policy.DefaultMemory() != wantMemory {
		t.Fatalf("DefaultProcesses %d, DefaultMemory %v; want 1024 and %v (half of this host's memory, at most 8 GiB)",
			policy.DefaultProcesses, policy.DefaultMemory(), wantMemory)
	}
	file := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Limits{Processes: policy.DefaultProcesses, Memory: policy.DefaultMemory()}
	for name, p := range map[string]policy.Policy{
		"Default":                    policy.Default(),
		"an empty policy file":       loaded,
		"Default widened by --write": policy.Default().Extend(policy.Policy{Write: []string{"/w"}}),
	} {
		n, err := p.Normalize("/")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n.Limits != want {
			t.Errorf("%s: limits %+v, want %+v", name, n.Limits, want)
		}
		if s, sub := n.Summary(), "Memory limit "+wantMemory.String()+". At most 1024 processes."; !strings.Contains(s, sub) {
			t.Errorf("%s: summary %q lacks %q", name, s, sub)
		}
	}
}

// Processes and memory are lifted by Unlimited, in code and
// as the word unlimited in a file; Extend carries it over a narrower
// policy's limit, where a 0 keeps that limit.
func TestUnlimitedLiftsALimit(t *testing.T) {
	def := policy.DefaultMemory()
	const u = policy.Unlimited
	for _, c := range []struct {
		name  string
		p, q  policy.Limits
		wantP int
		wantM policy.Size
	}{
		{"0 keeps the default", policy.Default().Limits, policy.Limits{}, policy.DefaultProcesses, def},
		{"Unlimited lifts the default", policy.Default().Limits, policy.Limits{Processes: u, Memory: u}, u, u},
		{"a number replaces the default", policy.Default().Limits, policy.Limits{Processes: 64, Memory: 1 << 30}, 64, 1 << 30},
		{"0 keeps Unlimited", policy.Limits{Processes: u, Memory: u}, policy.Limits{}, u, u},
		{"a number replaces Unlimited", policy.Limits{Processes: u, Memory: u}, policy.Limits{Processes: 64, Memory: 1 << 30}, 64, 1 << 30},
		{"one lifted, one kept", policy.Default().Limits, policy.Limits{Processes: u}, u, def},
	} {
		got := policy.Policy{Limits: c.p}.Extend(policy.Policy{Limits: c.q}).Limits
		if got.Processes != c.wantP || got.Memory != c.wantM {
			t.Errorf("%s: %+v extended by %+v = %+v; want processes %d, memory %d", c.name, c.p, c.q, got, c.wantP, c.wantM)
		}
	}
	write := fileWriter(t)
	write("lifted.yaml", "limits: {processes: unlimited, memory: unlimited}\n")
	for _, c := range []struct {
		body  string
		wantP int
		wantM policy.Size
	}{
		{"limits: {processes: unlimited, memory: unlimited}\n", u, u},
		{"limits: {processes: 'unlimited', memory: \"unlimited\"}\n", u, u},
		{"limits: {processes: unlimited}\n", u, def},
		{"limits: {memory: unlimited}\n", policy.DefaultProcesses, u},
		{"limits: {processes: 64, memory: 1G}\n", 64, 1 << 30},
		{"extends: lifted.yaml\n", u, u},
		{"extends: lifted.yaml\nlimits: {processes: 64}\n", 64, u},
	} {
		p, err := policy.Load(write("p.yaml", c.body))
		if err == nil {
			p, err = p.Normalize("/")
		}
		if err != nil || p.Limits.Processes != c.wantP || p.Limits.Memory != c.wantM {
			t.Errorf("%q: limits %+v, %v; want processes %d, memory %d", c.body, p.Limits, err, c.wantP, c.wantM)
		}
	}
	// Anything else that might be meant as "none" is refused, naming the
	// line and the word to write.
	for _, c := range []struct{ body, want string }{
		{"limits: {processes: 0}\n", "line 1: process limit 0 is no limit here: give a number of processes, or unlimited for none"},
		{"limits: {processes: -1}\n", "line 1: process limit -1 is negative: give a number of processes, or unlimited"},
		{"limits: {processes: Unlimited}\n", `line 1: processes "Unlimited": give a limit, or unlimited for none`},
		{"limits: {processes: none}\n", `processes "none": give a limit, or unlimited`},
		{"limits: {processes: \"64\"}\n", `processes "64": give a limit, or unlimited`},
		{"limits: {processes: [1]}\n", `processes "": give a limit, or unlimited`},
		{"limits: {processes: ~}\n", `processes "~": give a limit, or unlimited`},
		{"limits: {processes: }\n", `processes "": give a limit, or unlimited`},
		{"limits: {memory: null}\n", `memory "null": give a limit, or unlimited`},
		{"limits: {memory: 0}\n", `memory limit "0" is no limit here: give a size (512M), or unlimited for none`},
		{"limits: {memory: -1}\n", "bad size"},
		{"limits: {memory: none}\n", "bad size"},
		{"limits: {file_size: unlimited}\n", "bad size"},
		{"limits: {open_files: unlimited}\n", "not a whole number"},
	} {
		_, err := policy.Load(write("bad.yaml", c.body))
		if !errors.Is(err, policy.ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want a one-line configuration error containing %q", c.body, err, c.want)
		}
	}
}

// Normalize takes Unlimited for processes and memory, and still refuses
// any other negative limit, naming it; the summary says "no limit" in
// words.
func TestNormalizeTakesUnlimitedOnly(t *testing.T) {
	const u = policy.Unlimited
	p, err := policy.Policy{Limits: policy.Limits{Processes: u, Memory: u}}.Normalize("/")
	if err != nil {
		t.Fatalf("Unlimited processes and memory: %v", err)
	}
	for _, want := range []string{"No memory limit.", "No process limit."} {
		if s := p.Summary(); !strings.Contains(s, want) || strings.Contains(s, "At most -1") || strings.Contains(s, "limit -1") {
			t.Errorf("summary %q: want %q", s, want)
		}
	}
	for _, c := range []struct {
		l    policy.Limits
		want string
	}{
		{policy.Limits{Processes: -2}, "process limit -2 is negative: give a positive limit, or unlimited for none"},
		{policy.Limits{Memory: -2}, "memory limit -2 is negative: give a positive limit, or unlimited for none"},
		{policy.Limits{CPUTime: u}, "cpu time limit -1ns is negative: give a positive limit, or 0 for none"},
		{policy.Limits{FileSize: u}, "file size limit -1 is negative: give a positive limit, or 0 for none"},
		{policy.Limits{OpenFiles: u}, "open-files limit -1 is negative: give a positive limit, or 0 for none"},
	} {
		if _, err := (policy.Policy{Limits: c.l}).Normalize("/"); !errors.Is(err, policy.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want a configuration error containing %q", c.l, err, c.want)
		}
	}
}

// Enforcement reads Unlimited as none (0); every other limit is as set.
func TestEnforcedReadsUnlimitedAsNone(t *testing.T) {
	const u = policy.Unlimited
	for _, c := range []struct{ in, want policy.Limits }{
		{policy.Limits{Processes: u, Memory: u}, policy.Limits{}},
		{policy.Limits{Processes: u, Memory: 1 << 30, CPUTime: time.Second}, policy.Limits{Memory: 1 << 30, CPUTime: time.Second}},
		{policy.Limits{Processes: 64, Memory: u, FileSize: 1 << 20, OpenFiles: 32}, policy.Limits{Processes: 64, FileSize: 1 << 20, OpenFiles: 32}},
		{policy.Default().Limits, policy.Default().Limits},
	} {
		if got := c.in.Enforced(); got != c.want {
			t.Errorf("%+v.Enforced() = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// Flags and files write a process or memory limit as a positive number
// or the word unlimited: no 0 (which would keep the default), no
// negative, no other base.
func TestParseProcessAndMemoryLimits(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"unlimited", policy.Unlimited, true}, {"1024", 1024, true}, {"4", 4, true},
		{"0", 0, false}, {"-1", 0, false}, {"010", 0, false}, {"Unlimited", 0, false}, {"unlimited ", 0, false}, {"", 0, false}, {"inf", 0, false},
	} {
		if v, err := policy.ParseProcessLimit(c.in); (err == nil) != c.ok || v != c.want || err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseProcessLimit(%q) = %d, %v; want %d, ok %v", c.in, v, err, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		in   string
		want policy.Size
		ok   bool
	}{
		{"unlimited", policy.Unlimited, true}, {"512M", 512 << 20, true}, {"8G", 8 << 30, true},
		{"0", 0, false}, {"0G", 0, false}, {"-1", 0, false}, {"Unlimited", 0, false}, {"none", 0, false}, {"", 0, false},
	} {
		if v, err := policy.ParseMemoryLimit(c.in); (err == nil) != c.ok || v != c.want || err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseMemoryLimit(%q) = %d, %v; want %d, ok %v", c.in, v, err, c.want, c.ok)
		}
	}
}

// fileWriter returns a function that writes a file of body in a fresh
// directory of t's and returns its path.
func fileWriter(t *testing.T) func(name, body string) string {
	t.Helper()
	dir := t.TempDir()
	return func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// policyFile writes body to p.yaml in a fresh directory of t's and
// returns its path.
func policyFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// hasControl reports whether s holds a control character, a bidi control
// or a Unicode line or paragraph separator.
func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
	}) >= 0
}

// Load refuses a second YAML document rather than ignore it (and its
// deny list), with an error matching policy.ErrConfig.
// Origin: review 5.
func TestLoadRejectsTrailingDocuments(t *testing.T) {
	p := policyFile(t, "read: [/data]\n---\ndeny: [/data/secret]\n")
	pol, err := policy.Load(p)
	if err == nil {
		t.Fatalf("Load accepted two YAML documents and dropped the second one's deny list: Deny=%q", pol.Deny)
	}
	if !errors.Is(err, policy.ErrConfig) {
		t.Errorf("error %v does not match policy.ErrConfig", err)
	}
}

// YAML reads a bare ~ (or null) as null, and yaml.v3 drops null elements
// of a list: Load refuses a null path entry, so "deny: [~]" (meant as
// "hide my home") is an error, not a deny of nothing.
// Origin: review 5.
func TestLoadNullPathEntryIsAnError(t *testing.T) {
	for _, body := range []string{"read: [/home]\ndeny: [~]\n", "read: [/home]\ndeny: [null, /home/x]\n", "read: [~]\n"} {
		pol, err := policy.Load(policyFile(t, body))
		if err == nil {
			t.Errorf("%q: accepted; the null entry was dropped (Read=%q Deny=%q)", body, pol.Read, pol.Deny)
		}
	}
}

// A null entry in network.allow or network.deny is an error, as in path
// lists (yaml.v3 skips null sequence items, and an empty "" entry is an
// error): "deny: [evil.com, ~]" or a stray "-" line cannot silently mean
// less than was written.
// Origin: review 9.
func TestLoadNullHostEntryIsAnError(t *testing.T) {
	for _, body := range []string{
		"network: {allow: [a.example.com], deny: [~]}\n",
		"network: {allow: [a.example.com], deny: [b.a.example.com, null]}\n",
		"network:\n  allow: [a.example.com]\n  deny:\n    - b.a.example.com\n    -\n",
		"network: {allow: [a.example.com, ~]}\n",
	} {
		pol, err := policy.Load(policyFile(t, body))
		if err == nil {
			_, err = pol.Normalize("/")
		}
		if err == nil {
			t.Errorf("%q: accepted as allow %q deny %q; a null entry was dropped", body, pol.Hosts, pol.DenyHosts)
		}
	}
}

// hutch never expands ~, so a path starting with ~ (in a policy file, or
// --deny=~/.ssh, which the shell does not expand either) is an error
// rather than DIR/~/.ssh, a deny that would protect nothing.
// Origin: review 5.
func TestTildePathIsAnError(t *testing.T) {
	pol, err := policy.Load(policyFile(t, "read: [/home/me]\ndeny: [~/.ssh]\n"))
	if err == nil {
		t.Errorf("deny ~/.ssh accepted as %q", pol.Deny[len(pol.Deny)-1])
	}
	if _, err := (policy.Policy{Read: []string{"/home/me"}, Deny: []string{"~/.ssh"}}).Normalize("/work"); err == nil {
		t.Errorf("Normalize accepted deny ~/.ssh (it means /work/~/.ssh)")
	}
}

// hutch expands variables no more than ~: "deny: [$HOME/.ssh]" is an
// error rather than DIR/$HOME/.ssh, a deny that would protect nothing.
// Origin: review 9.
func TestVariablePathIsAnError(t *testing.T) {
	for _, d := range []string{"$HOME/.ssh", "${HOME}/.ssh"} {
		pol, err := policy.Load(policyFile(t, "read: [/home]\ndeny: ['"+d+"']\n"))
		if err == nil {
			t.Errorf("deny %s in a file accepted as %q", d, pol.Deny[len(pol.Deny)-1])
		}
		if p, err := (policy.Policy{Read: []string{"/home"}, Deny: []string{d}}).Normalize("/work"); err == nil {
			t.Errorf("Normalize accepted deny %s as %q", d, p.Deny)
		}
	}
}

// Extend with network all (or none) keeps the new layer's own DenyHosts,
// so {Network: all, DenyHosts: [evil.com]} gets the "network all with
// host entries" error a policy file gets, not the whole network.
// Origin: review 5.
func TestExtendNetworkAllKeepsOwnDenyForValidation(t *testing.T) {
	for _, n := range []policy.Network{policy.NetworkAll, policy.NetworkNone} {
		p := policy.Default().Extend(policy.Policy{Network: n, DenyHosts: []string{"evil.com"}})
		if got, err := p.Normalize("/"); err == nil {
			t.Errorf("network %s with deny evil.com normalized to network %s, DenyHosts %q: the deny was dropped", n, got.Network, got.DenyHosts)
		}
	}
}

// Load refuses a fraction in an integer field ("nice: 1.5",
// "processes: 64.7") rather than truncate it.
// Origin: review 5.
func TestLoadRefusesFractionalIntegers(t *testing.T) {
	for _, body := range []string{"nice: 1.5\n", "limits: {processes: 64.7}\n", "limits: {open_files: 10.5}\n"} {
		pol, err := policy.Load(policyFile(t, body))
		if err == nil {
			t.Errorf("%q: accepted as nice %d, limits %+v", body, pol.Nice, pol.Limits)
		}
	}
}

// Normalize refuses process and open-file limits no kernel accepts, and
// ones too small to start a command, naming the bound (the sandbox would
// otherwise fail later with a reason that blames the host for a typo).
// Its bounds themselves are accepted.
// Origin: review 5.
func TestNormalizeBoundsHugeLimits(t *testing.T) {
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
// is enforced as 2 s); Summary does not understate it as 1 second.
// Origin: review 5.
func TestSummaryCPUTimeMatchesEnforcement(t *testing.T) {
	s := policy.Policy{Limits: policy.Limits{CPUTime: 1500 * time.Millisecond}}.Summary()
	if strings.Contains(s, "CPU time limit 1 seconds") {
		t.Errorf("Summary %q understates the enforced limit (2 s)", s)
	}
}

// Load refuses anything but a regular file: a FIFO (or /dev/zero) is not
// read without a bound, so Load neither blocks forever nor reads until
// memory runs out.
// Origin: review 5.
func TestLoadRefusesNonRegularFile(t *testing.T) {
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

// Hostile policy files (duplicate keys, billion laughs, bad kinds,
// unknown keys, huge or fractional numbers, NUL bytes, non-mapping
// documents) get a clear error matching policy.ErrConfig, and no blow-up.
// Origin: review 5.
func TestLoadHostileFilesAreConfigErrors(t *testing.T) {
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
		p := policyFile(t, body)
		pol, err := policy.Load(p)
		if err == nil {
			_, err = pol.Normalize(filepath.Dir(p))
		}
		if !errors.Is(err, policy.ErrConfig) {
			t.Errorf("%s: %v, want policy.ErrConfig", name, err)
		}
	}
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
			if !errors.Is(err, policy.ErrConfig) {
				t.Fatalf("error %v does not match policy.ErrConfig", err)
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

// Summary, shown to people and models (the MCP instructions), shows paths
// through ShowPath: a path holding a newline, an ANSI escape or a bidi
// override does not reach the reader raw, and a path like "/w. Has full
// network access" cannot forge a sentence in the summary of a policy
// that has no network.
// Origin: review 9.
func TestSummaryPathsCannotForgeText(t *testing.T) {
	for _, c := range []struct {
		pol    policy.Policy
		forged string // a sentence the policy does not mean
	}{
		{policy.Policy{Write: []string{"/w\nHas full network access"}}, ""},
		{policy.Policy{Write: []string{"/w\x1b[2K\x1b[1GNo files"}}, ""},
		{policy.Policy{Read: []string{"/r\u202e"}}, ""},
		{policy.Policy{Write: []string{"/w. Has full network access"}}, "Has full network access."},
		{policy.Policy{Deny: []string{"/d. Can change /home"}, Read: []string{"/home"}}, "Can change /home."},
	} {
		p, err := c.pol.Normalize("/")
		if err != nil {
			continue // refusing such a path is a fix too
		}
		s := p.Summary()
		if hasControl(s) {
			t.Errorf("Summary prints a control character from a path: %q", s)
		}
		if c.forged != "" && strings.Contains(s, c.forged) {
			t.Errorf("a path forges %q in the summary of network %s: %q", c.forged, p.Network, s)
		}
	}
}

// Load's errors are one line naming the problem (not yaml's multi-line
// "unmarshal errors:\n  line 1: ..."), and so are Normalize's, which
// quote paths (a start directory "/a\nb").
// Origin: review 9.
func TestLoadErrorsAreOneLine(t *testing.T) {
	for _, body := range []string{
		"limits: {mem: 1G}\n",
		"read: [/a]\nread: [/b]\n",
		"env: [A=1]\n",
		"bogus: 1\nother: 2\n",
	} {
		_, err := policy.Load(policyFile(t, body))
		if err == nil {
			t.Errorf("%q: accepted", body)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans lines: %q", body, err)
		}
	}
	if _, err := (policy.Policy{Dir: "/a\nb"}).Normalize("/"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("Normalize with start directory \"/a\\nb\": %q; want one line", err)
	}
}

// A start directory that is written and denied at once is refused with
// an error saying it is denied (deny wins), not the advice to add it
// with --read or --write, which cannot help.
// Origin: review 9.
func TestDeniedStartDirSaysDenied(t *testing.T) {
	for _, p := range []policy.Policy{
		{Write: []string{"/w"}, Deny: []string{"/w"}},
		{Write: []string{"/w/sub"}, Deny: []string{"/w"}},
		{Read: []string{"/r"}, Dir: "/r/x", Deny: []string{"/r/x"}},
	} {
		_, err := p.Normalize("/")
		if err == nil {
			t.Errorf("%+v: a denied start directory was accepted", p)
			continue
		}
		if !strings.Contains(err.Error(), "denied") && !strings.Contains(err.Error(), "deny") {
			t.Errorf("%+v: %q does not say the start directory is denied", p, err)
		}
	}
}

// Hostile input to Load, Normalize, Extend and ParseSize gets a clear
// error matching policy.ErrConfig, or the right value: a BOM is no error, a
// merge key cannot empty an explicit deny, widening keeps every deny.
// Origin: review 9.
func TestHostileInputGetsConfigErrorOrRightValue(t *testing.T) {
	for name, body := range map[string]string{
		"non-UTF-8":           "read: [/opt/\xff]\n",
		"empty doc then doc":  "---\n---\nread: [/opt]\n",
		"doc end then doc":    "read: [/opt]\n...\n---\ndeny: [/x]\n",
		"network None":        "network: None\n",
		"network false":       "network: false\n",
		"network empty map":   "network: {}\n",
		"network allow str":   "network: {allow: example.com}\n",
		"deny host empty":     "network: {allow: [a.com], deny: [\"\"]}\n",
		"nice yaml1.1 bool":   "nice: on\n",
		"nice string":         "nice: \"5\"\n",
		"cpu bare number":     "limits: {cpu_time: 5}\n",
		"timeout huge":        "timeout: 9999999999h\n",
		"timeout negative":    "timeout: -1s\n",
		"processes negative":  "limits: {processes: -4}\n",
		"processes int64 max": "limits: {processes: 9223372036854775807}\n",
		"memory list":         "limits: {memory: [1]}\n",
		"limits unknown":      "limits: {mem: 1G}\n",
		"merge unknown key":   "<<: {bogus: 1}\n",
		"complex key":         "? [a]\n: b\n",
		"nested path list":    "deny: [[/a]]\n",
		"map in path list":    "deny: [{a: b}]\n",
		"extends self":        "extends: p.yaml\n",
		"extends list":        "extends: [a]\n",
		"dir list":            "dir: [/a]\n",
		"env duplicate":       "env: {A: 1, A: 2}\n",
		"env list":            "env: [A=1]\n",
		"write via dotdot /":  "write: [/usr/..]\n",
		"read //":             "read: [\"//\"]\n",
	} {
		pol, err := policy.Load(policyFile(t, body))
		if err == nil {
			_, err = pol.Normalize("/")
		}
		if !errors.Is(err, policy.ErrConfig) {
			t.Errorf("%s: %v, want policy.ErrConfig", name, err)
		}
	}
	// A BOM is not an error; a merge key cannot empty an explicit deny.
	for body, wantDeny := range map[string]string{"\ufeffdeny: [/a]\n": "/a", "deny: [/a]\n<<: {deny: []}\n": "/a"} {
		pol, err := policy.Load(policyFile(t, body))
		if err != nil || !slices.Contains(pol.Deny, wantDeny) {
			t.Errorf("%q: deny %q, %v; want %s denied", body, pol.Deny, err, wantDeny)
		}
	}
	// A wider policy over a narrower one keeps every deny, and deny wins.
	narrow := policy.Policy{Read: []string{"/w"}, Deny: []string{"/w/secret"}, Network: policy.NetworkAllow, Hosts: []string{"a.example.com"}, DenyHosts: []string{"b.a.example.com"}}
	wide := narrow.Extend(policy.Policy{Write: []string{"/w", "/w/secret"}, Read: []string{"/w/secret/x"}, Hosts: []string{"*.a.example.com"}})
	p, err := wide.Normalize("/")
	if err != nil {
		t.Fatal(err)
	}
	if p.CanRead("/w/secret/x") || p.CanWrite("/w/secret") || !slices.Contains(p.DenyHosts, "b.a.example.com") || p.Network != policy.NetworkAllow {
		t.Errorf("widening lost a deny: %+v", p)
	}
	// Sizes.
	for in, want := range map[string]policy.Size{"10GiB": 10 << 30, "10gb": 10 << 30, " 5M": 5 << 20, "5 M": 5 << 20, "0": 0} {
		if v, err := policy.ParseSize(in); err != nil || v != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, v, err, want)
		}
	}
	for _, in := range []string{"-1", "1e9", "9999999999999999999999", "5MM", "0x10M", "1kk", "inf", "5 ki b", ""} {
		if v, err := policy.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error", in, v)
		}
	}
}

// FuzzNormalize: whatever the paths, Normalize does not panic; its
// errors match policy.ErrConfig and are one line; a normalized policy has clean
// absolute paths, never lets a denied path be read or written, and
// normalizing again changes nothing.
// Origin: review 9.
func FuzzNormalize(f *testing.F) {
	for _, s := range [][4]string{
		{"/w", "/w/sub", "/w", ""}, {"rel", "../x", ".", "rel"}, {"", "", "", ""}, {"/a\x00b", "/w", "/w/x", "/w"},
		{"~", "/w", "", ""}, {"/w/./x//", "/w/../w", "/w/x/", "/w/x"}, {"/", "", "", ""}, {"/a\nb", "/a", "/a/b", "/a"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, read, write, deny, dir string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		in := policy.Policy{Read: split(read), Write: split(write), Deny: split(deny), Dir: dir}
		p, err := in.Normalize("/cwd")
		if err != nil {
			// (Normalize quotes paths, so its errors hold no line
			// break: TestLoadErrorsAreOneLine. The bound here is looser,
			// as many as the input holds.)
			if !errors.Is(err, policy.ErrConfig) || strings.Count(err.Error(), "\n") > strings.Count(read+write+deny+dir, "\n") {
				t.Fatalf("Normalize(%+v): %q: want one line matching policy.ErrConfig", in, err)
			}
			return
		}
		for _, list := range [][]string{p.Read, p.Write, p.Deny, {p.Dir}} {
			for _, x := range list {
				if !filepath.IsAbs(x) || filepath.Clean(x) != x {
					t.Fatalf("Normalize(%+v) left path %q unclean", in, x)
				}
			}
		}
		for _, d := range p.Deny {
			for _, x := range []string{d, filepath.Join(d, "child")} {
				if p.CanRead(x) || p.CanWrite(x) {
					t.Fatalf("denied %q is accessible under %+v", x, p)
				}
			}
		}
		q, err := p.Normalize("/other")
		if err != nil || !slices.Equal(q.Read, p.Read) || !slices.Equal(q.Write, p.Write) || !slices.Equal(q.Deny, p.Deny) || q.Dir != p.Dir {
			t.Fatalf("Normalize is not idempotent: %+v then %+v, %v", p, q, err)
		}
		_ = p.Summary()
	})
}

// FuzzExtend: extending a policy by anything keeps every one of its
// denied paths and denied hosts (or is refused by Normalize), and never
// turns a network of none into all unless the extension says all.
// Origin: review 9.
func FuzzExtend(f *testing.F) {
	f.Add("/w", "/w/s", "", "a.example.com", "b.a.example.com", "/w", "/w/s", "", "")
	f.Add("/w", "/w/s", "allow", "a.example.com", "", "/", "", "all", "")
	f.Add("/w", "", "none", "", "", "", "", "", "x.example.com")
	f.Fuzz(func(t *testing.T, r1, d1, n1, h1, dh1, w2, r2, n2, h2 string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		base := policy.Policy{Read: split(r1), Deny: split(d1), Network: policy.Network(n1), Hosts: split(h1), DenyHosts: split(dh1)}
		b, err := base.Normalize("/")
		if err != nil {
			return
		}
		ext := policy.Policy{Write: split(w2), Read: split(r2), Network: policy.Network(n2), Hosts: split(h2)}
		p, err := b.Extend(ext).Normalize("/")
		if err != nil {
			return
		}
		for _, d := range b.Deny {
			if !slices.Contains(p.Deny, d) || p.CanRead(d) || p.CanWrite(d) {
				t.Fatalf("extension %+v un-denied %q: %+v", ext, d, p)
			}
		}
		if p.Network == policy.NetworkAllow {
			for _, d := range b.DenyHosts {
				if !slices.Contains(p.DenyHosts, d) {
					t.Fatalf("extension %+v dropped denied host %q: %+v", ext, d, p)
				}
			}
		}
		if b.Network != policy.NetworkAll && p.Network == policy.NetworkAll && ext.Network != policy.NetworkAll {
			t.Fatalf("extension %+v widened network %s to all", ext, b.Network)
		}
	})
}

// Normalize names a negative CPU time as it was written, a duration
// ("cpu time limit -1s is negative"), not a bare count of nanoseconds.
// Origin: review 14.
func TestNormalizeNamesNegativeCPUTimeAsWritten(t *testing.T) {
	_, err := policy.Policy{Limits: policy.Limits{CPUTime: -time.Second}}.Normalize("/")
	if err == nil || !strings.Contains(err.Error(), "cpu time limit -1s is negative") {
		t.Errorf("a cpu time of -1s: %v; want it named as -1s", err)
	}
}

// ShowPath quotes a path holding letters that render as blank space
// (Hangul fillers U+3164, U+115F, U+1160, U+FFA0: default-ignorable
// letters, Lo) or as punctuation (Lisu tone letters U+A4F8 "ꓸ", U+A4F9
// "ꓹ", U+A4FD "ꓽ", Lm, drawn as a full stop, comma and colon): such a
// path cannot forge a sentence in a summary.
// Origin: review 11.
func TestShowPathQuotesInvisibleAndDotLetters(t *testing.T) {
	for _, p := range []string{
		"/w\uA4F8\u3164Has\u3164full\u3164network\u3164access",
		"/home/u/proj\u3164",
		"/home/u/a\u115Fb",
		"/home/u/a\u1160b",
		"/home/u/a\uFFA0b",
	} {
		got := policy.ShowPath(p)
		if !strings.HasPrefix(got, `"`) {
			t.Errorf("ShowPath(%+q) = %s: shown unquoted", p, got)
		}
		pol := policy.Policy{Write: []string{p}}
		if s := pol.Summary(); strings.Contains(s, p) {
			t.Errorf("Summary shows %+q as is: %s", p, s)
		}
	}
}

// Summary shows host entries, like paths, with no raw line break or
// Unicode space: an entry with one around it (which the proxy's parser
// trims) is refused by Normalize or escaped in the summary.
// Origin: review 12.
func TestSummaryHostsCarryNoRawWhitespace(t *testing.T) {
	for _, h := range []string{"example.com\n", "example.com\u2028", "\u3000example.com", "example.com\r"} {
		p, err := policy.Policy{Network: policy.NetworkAllow, Hosts: []string{"ok.example"}, DenyHosts: []string{h}}.Normalize(t.TempDir())
		if err != nil {
			continue // refused: fine
		}
		s := p.Summary()
		if strings.ContainsAny(s, "\n\r\u2028\u3000") {
			t.Errorf("deny host %+q: Summary carries it raw: %q", h, s)
		}
	}
}

// The protected list is the default one unless a policy extends it, or
// removes entries explicitly: an unprotect that removes nothing, and an
// entry that is not a relative path below the writable directories, are
// errors, never ignored.
func TestProtectedListExtendsAndUnprotectsOnlyExplicitly(t *testing.T) {
	for _, c := range []struct {
		name               string
		protect, unprotect []string
		want, gone         []string // entries that must be in, and out of, Protected
		err                string   // the refusal's words; "" when valid
	}{
		{name: "default", want: policy.DefaultProtected},
		{name: "extended", protect: []string{".env", "tools/run.sh"}, want: append([]string{".env", "tools/run.sh"}, policy.DefaultProtected...)},
		{name: "one entry lifted", unprotect: []string{".vscode/"}, want: []string{".idea", ".git/hooks"}, gone: []string{".vscode"}},
		{name: "a directory lifts what it holds", unprotect: []string{".git"}, want: []string{".bashrc"}, gone: []string{".git/hooks", ".git/config", ".git/commondir"}},
		{name: "protect wins over unprotect", protect: []string{".vscode"}, unprotect: []string{".vscode"}, want: []string{".vscode"}},
		{name: "unprotect of an unknown entry", unprotect: []string{".vscod"}, err: "unprotect .vscod: no protected path"},
		{name: "absolute entry", protect: []string{"/etc/x"}, err: "not below a writable directory"},
		{name: "entry above", protect: []string{"../x"}, err: "not below a writable directory"},
		{name: "the directory itself", unprotect: []string{"."}, err: "not below a writable directory"},
		{name: "comma", protect: []string{"a,b"}, err: "relative to the writable directories"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := policy.Default().Extend(policy.Policy{Write: []string{"/w"}, Protect: c.protect, Unprotect: c.unprotect}).Normalize("/")
			if c.err != "" {
				if !errors.Is(err, policy.ErrConfig) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Normalize: %v, want ErrConfig saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			got := p.Protected()
			for _, e := range c.want {
				if !slices.Contains(got, e) {
					t.Errorf("Protected() = %v, lacks %s", got, e)
				}
			}
			for _, e := range c.gone {
				if slices.Contains(got, e) {
					t.Errorf("Protected() = %v, still holds %s", got, e)
				}
			}
		})
	}
}

// A policy file's protect and unprotect entries are relative to the
// writable paths, not to the file's directory, and the summary names the
// list when it differs from the default.
func TestLoadProtectEntriesStayRelative(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(f, []byte("write: [.]\nprotect: [.env]\nunprotect: [.idea/]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = p.Normalize(dir); err != nil {
		t.Fatal(err)
	}
	if got := p.Protected(); !slices.Contains(got, ".env") || slices.Contains(got, ".idea") {
		t.Errorf("Protected() = %v, want .env in and .idea out", got)
	}
	if s := p.Summary(); !strings.Contains(s, ".env") || strings.Contains(s, ".idea,") {
		t.Errorf("Summary() = %q, want the protected list with .env and without .idea", s)
	}
}
