//go:build linux

package seccomp

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
)

// The argument tests hutch's rules use today compare low words only (namespace
// flags, mode bits, open flags) or values with a zero high word (socket
// families), so Program alone never reaches argTest's code for high bits or
// for values in several high words. These tests assemble rules of every shape
// on their own and check the verdicts against the rule's meaning in Go.

// ruleNr is the system-call number the assembled test rules claim.
const ruleNr = 4242

// ruleVM assembles r alone, as Program places a rule: the number loaded into
// A, r's block, then ENOSYS for any other call (a verdict r itself never
// gives, so a block that falls through for its own call is caught).
func ruleVM(r argRule) (*bpf.VM, error) {
	var a bpfAsm
	a.add(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if err := a.argRule(r); err != nil {
		return nil, err
	}
	a.add(bpf.RetConstant{Val: retENOSYS})
	prog, err := a.program()
	if err != nil {
		return nil, err
	}
	return bpf.NewVM(prog)
}

// ruleWant is what r means: EPERM when every one of its tests holds.
func ruleWant(r argRule, args [6]uint64) uint32 {
	for _, t := range r.all {
		v := args[t.arg]
		var holds bool
		switch {
		case t.anyBits != 0:
			holds = v&t.anyBits != 0
		case len(t.lowOneOf) > 0:
			holds = slices.Contains(t.lowOneOf, uint32(v))
		default:
			holds = !slices.Contains(t.noneOf, v)
		}
		if !holds {
			return retAllow
		}
	}
	return retEPERM
}

// ruleValues are arguments worth trying against r: each constant of its
// tests, with each word flipped, cleared and saturated in turn, and a few
// fixed and random values.
func ruleValues(r argRule, rng *rand.Rand) []uint64 {
	vals := []uint64{0, 1, 1 << 31, 1 << 32, 1 << 63, 0xffffffff, 0xffffffff00000000, ^uint64(0)}
	for _, t := range r.all {
		consts := append([]uint64{t.anyBits}, t.noneOf...)
		for _, lo := range t.lowOneOf {
			consts = append(consts, uint64(lo))
		}
		for _, c := range consts {
			vals = append(vals, c, c^1, c^1<<32, c&0xffffffff, c&^0xffffffff, c|0xffffffff, c|0xffffffff00000000, c+1, c-1, ^c)
		}
	}
	for range 16 {
		vals = append(vals, rng.Uint64(), rng.Uint64()&0x1_0000_00ff)
	}
	return vals
}

// checkRule runs every pairing of ruleValues through r's program for each
// argument r tests (the others random), and the other-call fall-through.
func checkRule(t *testing.T, r argRule, rng *rand.Rand) {
	t.Helper()
	vm, err := ruleVM(r)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	vals := ruleValues(r, rng)
	var args [6]uint64
	for i := range args {
		args[i] = rng.Uint64()
	}
	var tested []uint32
	for _, tt := range r.all {
		if !slices.Contains(tested, tt.arg) {
			tested = append(tested, tt.arg)
		}
	}
	// Every value in the first tested argument, against every value in the
	// second (when there is one).
	second := vals[:1]
	if len(tested) > 1 {
		second = vals
	}
	for _, v := range vals {
		for _, w := range second {
			args[tested[0]] = v
			if len(tested) > 1 {
				args[tested[1]] = w
			}
			c := seccompCase{name: r.name, arch: auditArch, nr: ruleNr, args: args}
			if got, want := seccompRun(t, vm, c), ruleWant(r, args); got != want {
				t.Fatalf("%s: args %#x: %s, want %s", r.name, args, verdictName(got), verdictName(want))
			}
		}
	}
	other := seccompCase{name: r.name + ", another call", arch: auditArch, nr: ruleNr + 1, args: args}
	if got := seccompRun(t, vm, other); got != retENOSYS {
		t.Fatalf("%s: another system call got %s, want the fall-through", r.name, verdictName(got))
	}
}

func TestSeccompArgTestShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rules := []struct {
		name string
		all  []argTest
	}{
		{"anyBits, low word only", []argTest{{arg: 0, anyBits: 0x7e020080}}},
		{"anyBits, high word only", []argTest{{arg: 1, anyBits: 1 << 40}}},
		{"anyBits, both words", []argTest{{arg: 2, anyBits: 1<<40 | 1}}},
		{"anyBits, every bit", []argTest{{arg: 5, anyBits: ^uint64(0)}}},
		{"noneOf, one value", []argTest{{arg: 0, noneOf: []uint64{2}}}},
		{"noneOf, zero high word", []argTest{{arg: 0, noneOf: []uint64{2, 10, 16}}}},
		{"noneOf, one high word, not zero", []argTest{{arg: 4, noneOf: []uint64{7<<32 | 2, 7<<32 | 10}}}},
		{"noneOf, several high words", []argTest{{arg: 3, noneOf: []uint64{1, 1<<32 | 1, 0xffffffff00000002, 1<<32 | 7, 0}}}},
		{"noneOf, the same low word in each high word", []argTest{{arg: 1, noneOf: []uint64{5, 1<<32 | 5, 2<<32 | 5}}}},
		{"two tests: anyBits then noneOf", []argTest{{arg: 0, anyBits: 1<<33 | 0x40}, {arg: 3, noneOf: []uint64{1, 1<<32 | 1}}}},
		{"two tests: noneOf then anyBits", []argTest{{arg: 2, noneOf: []uint64{0, 1 << 63}}, {arg: 1, anyBits: 1 << 63}}},
		{"two tests, one argument", []argTest{{arg: 2, anyBits: 0xff}, {arg: 2, noneOf: []uint64{1, 2, 4}}}},
		{"lowOneOf, one value", []argTest{{arg: 1, lowOneOf: []uint32{1024}}}},
		{"lowOneOf, several values", []argTest{{arg: 1, lowOneOf: []uint32{0x5412, 0x541c, 0, 0xffffffff}}}},
		{"two tests: lowOneOf then anyBits", []argTest{{arg: 1, lowOneOf: []uint32{3, 9}}, {arg: 2, anyBits: 1<<32 | 4}}},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			checkRule(t, argRule{sysCall{r.name, ruleNr}, r.all}, rng)
		})
	}
}

// A test the assembler cannot express is an error, never a weaker rule.
func TestSeccompArgTestRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		all  []argTest
	}{
		{"no tests", nil},
		{"argument 6", []argTest{{arg: 6, anyBits: 1}}},
		{"an empty test", []argTest{{arg: 0}}},
		{"more values than a jump reaches", []argTest{{arg: 0, noneOf: manyValues(300)}}},
		{"more low values than a jump reaches", []argTest{{arg: 0, lowOneOf: manyLowValues(300)}}},
	} {
		if _, err := ruleVM(argRule{sysCall{c.name, ruleNr}, c.all}); err == nil {
			t.Errorf("%s: assembled", c.name)
		}
	}
}

// manyValues is n distinct values in one high word.
func manyValues(n int) []uint64 {
	v := make([]uint64, n)
	for i := range v {
		v[i] = uint64(i) * 3
	}
	return v
}

// manyLowValues is n distinct 32-bit values.
func manyLowValues(n int) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = uint32(i) * 5
	}
	return v
}

// FuzzSeccompArgTest checks one rule built from the fuzzer's constants (an
// anyBits test, or else a noneOf or lowOneOf test of up to four values, on
// argument 2, and optionally a second test on argument 4) against its
// meaning in Go.
func FuzzSeccompArgTest(f *testing.F) {
	f.Add(uint64(0), uint64(2), uint64(1<<32|2), uint64(0xffffffff00000002), uint64(7), uint8(3), uint64(0), uint64(2))
	f.Add(uint64(1<<40|1), uint64(0), uint64(0), uint64(0), uint64(0), uint8(0), uint64(1<<63), uint64(1<<40))
	f.Add(uint64(0), uint64(5), uint64(5), uint64(1<<32|5), uint64(0), uint8(4), uint64(0x10), uint64(5))
	f.Add(uint64(0), uint64(1024), uint64(0x5412), uint64(1<<32|0x541c), uint64(0), uint8(10), uint64(0), uint64(6))
	f.Fuzz(func(t *testing.T, anyBits, v0, v1, v2, v3 uint64, n uint8, second, seed uint64) {
		test := argTest{arg: 2, anyBits: anyBits}
		switch {
		case anyBits != 0:
		case n&8 != 0:
			test.lowOneOf = []uint32{uint32(v0), uint32(v1), uint32(v2), uint32(v3)}[:1+n%4]
		default:
			test.noneOf = []uint64{v0, v1, v2, v3}[:1+n%4]
		}
		all := []argTest{test}
		if second != 0 {
			all = append(all, argTest{arg: 4, anyBits: second})
		}
		name := fmt.Sprintf("fuzzed %#x", all)
		checkRule(t, argRule{sysCall{name, ruleNr}, all}, rand.New(rand.NewPCG(seed, anyBits)))
	})
}
