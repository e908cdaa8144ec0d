package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

func TestParseSize(t *testing.T) {
	good := map[string]policy.Size{
		"4096": 4096, "1k": 1024, "1K": 1024, "1KiB": 1024, "1kb": 1024, "512M": 512 << 20, "512MiB": 512 << 20,
		"1.5G": 3 << 29, "2g": 2 << 30, "1T": 1 << 40, "0": 0, " 8 M ": 8 << 20, "10b": 10,
	}
	for in, want := range good {
		if got, err := policy.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1M", "1X", "1e9", "lots", "1.2.3G", "99999999999T"} {
		if _, err := policy.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	for _, s := range []policy.Size{512 << 20, 1 << 30, 4097, 3 << 10} {
		b, _ := s.MarshalText()
		if back, err := policy.ParseSize(string(b)); err != nil || back != s {
			t.Errorf("%d -> %q -> %d, %v", s, b, back, err)
		}
	}
	if s := policy.Size(512 << 20).String(); s != "512 MiB" {
		t.Errorf("String = %q", s)
	}
}

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
		if _, err := p.Normalize(cwd); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
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
		if _, err := policy.Load(write(file, body)); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
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
		if _, err := q.Normalize("/"); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
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
		if _, err := policy.Load(file); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", body, err)
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
		if !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
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
		if _, err := (policy.Policy{Limits: c.l}).Normalize("/"); !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), c.want) {
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
