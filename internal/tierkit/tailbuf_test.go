package tierkit_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// naiveTail is the reference TailBuffer: it keeps everything and cuts on
// demand.
type naiveTail struct {
	max int
	all []byte
}

func (n *naiveTail) Write(p []byte) { n.all = append(n.all, p...) }

func (n *naiveTail) limit() int {
	if n.max <= 0 {
		return sandbox.DefaultMaxOutput
	}
	return n.max
}

func (n *naiveTail) Truncated() bool { return len(n.all) > n.limit() }

func (n *naiveTail) Bytes() []byte {
	out := n.all
	if len(out) > n.limit() {
		out = out[len(out)-n.limit():]
		for i := 0; i < utf8.UTFMax-1 && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
			out = out[1:]
		}
	}
	return append([]byte{}, out...)
}

// compareTail fails unless b and ref agree on everything observable.
func compareTail(t *testing.T, b *tierkit.TailBuffer, ref *naiveTail, what string) {
	t.Helper()
	if got, want := b.Total(), int64(len(ref.all)); got != want {
		t.Fatalf("%s: Total() = %d, want %d", what, got, want)
	}
	if got, want := b.Truncated(), ref.Truncated(); got != want {
		t.Fatalf("%s: Truncated() = %v, want %v", what, got, want)
	}
	if got, want := b.Bytes(), ref.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("%s: Bytes() = %q, want %q", what, got, want)
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		writes    []string
		want      string
		truncated bool
	}{
		{"nothing", 8, nil, "", false},
		{"empty write", 8, []string{""}, "", false},
		{"small writes", 8, []string{"ab", "cd", "e"}, "abcde", false},
		{"exactly max in one write", 4, []string{"abcd"}, "abcd", false},
		{"exactly max in pieces", 4, []string{"ab", "", "cd"}, "abcd", false},
		{"one byte over", 4, []string{"abcde"}, "bcde", true},
		{"more than max in one write", 4, []string{"abcdefghij"}, "ghij", true},
		{"fill then overflow", 4, []string{"abc", "de"}, "bcde", true},
		{"wrap exactly once", 4, []string{"abcd", "efgh"}, "efgh", true},
		{"wrap by one", 4, []string{"abcd", "e"}, "bcde", true},
		{"big write after wrap", 4, []string{"abcd", "e", "fghijk"}, "hijk", true},
		{"small write after big", 4, []string{"abcdefgh", "i"}, "fghi", true},
		{"max one", 1, []string{"a", "b", "c"}, "c", true},
		{"empty write when full", 3, []string{"abcd", ""}, "bcd", true},
		{"many writes wrap many times", 3, strings.Split("the quick brown fox", ""), "fox", true},
		{"negative max uses default", -1, []string{"abc"}, "abc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tierkit.TailBuffer{Max: tt.max}
			var total int64
			for _, w := range tt.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
				total += int64(len(w))
			}
			if got := string(b.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			if b.Total() != total {
				t.Errorf("Total() = %d, want %d", b.Total(), total)
			}
			if b.Truncated() != tt.truncated {
				t.Errorf("Truncated() = %v, want %v", b.Truncated(), tt.truncated)
			}
		})
	}
}

func TestTailBufferZeroValue(t *testing.T) {
	var b tierkit.TailBuffer
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	ref := &naiveTail{}
	for range sandbox.DefaultMaxOutput/len(chunk) - 1 {
		b.Write(chunk)
		ref.Write(chunk)
	}
	compareTail(t, &b, ref, "below DefaultMaxOutput")
	if b.Truncated() {
		t.Fatal("truncated before DefaultMaxOutput bytes")
	}
	b.Write(chunk)
	ref.Write(chunk)
	compareTail(t, &b, ref, "exactly DefaultMaxOutput")
	if b.Truncated() || len(b.Bytes()) != sandbox.DefaultMaxOutput {
		t.Fatalf("at DefaultMaxOutput: Truncated() = %v, len = %d", b.Truncated(), len(b.Bytes()))
	}
	b.Write([]byte("xyz"))
	ref.Write([]byte("xyz"))
	compareTail(t, &b, ref, "past DefaultMaxOutput")
	got := b.Bytes()
	if !b.Truncated() || len(got) != sandbox.DefaultMaxOutput || !bytes.HasSuffix(got, []byte("efxyz")) {
		t.Fatalf("past DefaultMaxOutput: Truncated() = %v, len = %d, tail %q", b.Truncated(), len(got), got[len(got)-5:])
	}
	if b.Total() != int64(sandbox.DefaultMaxOutput+3) {
		t.Fatalf("Total() = %d", b.Total())
	}
}

func TestTailBufferUTF8(t *testing.T) {
	const euro = "€" // E2 82 AC
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		// Truncated: a leading partial sequence goes.
		{"cut after first byte", 4, []string{"a" + euro + "bc"}, "bc"}, // kept "\x82\xACbc"
		{"rune fits exactly", 5, []string{"a" + euro + "bc"}, euro + "bc"},
		{"cut after second byte", 3, []string{"a" + euro + "bc"}, "bc"},  // kept "\xACbc"
		{"cut at rune start", 4, []string{"a" + euro + "b"}, euro + "b"}, // kept "€b"
		{"two byte rune cut", 2, []string{"éx"}, "x"},                    // kept "\xA9x"
		{"four byte rune cut", 4, []string{"😀x"}, "x"},                   // kept "\x9F\x98\x80x"
		{"all continuation", 2, []string{"x" + euro}, ""},                // kept "\x82\xAC"
		{"across wrap", 4, []string{euro, euro}, euro},                   // kept "\xAC€"
		{"many writes", 4, []string{euro, "a", euro, euro}, euro},        // kept "\xAC€"
		{"at most three dropped", 5, []string{"a\x80\x80\x80\x80\x80"}, "\x80\x80"},
		{"invalid start byte kept", 3, []string{"a\xffbc"}, "\xffbc"},
		// Not truncated: the bytes are the caller's, broken or not.
		{"leading continuation kept", 8, []string{"\x82\xACab"}, "\x82\xACab"},
		{"exactly max kept", 4, []string{"\x82\xACab"}, "\x82\xACab"},
		{"trailing partial kept", 8, []string{"ab\xE2\x82"}, "ab\xE2\x82"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tierkit.TailBuffer{Max: tt.max}
			ref := &naiveTail{max: tt.max}
			for _, w := range tt.writes {
				b.Write([]byte(w))
				ref.Write([]byte(w))
			}
			if got := string(b.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
			compareTail(t, b, ref, tt.name)
		})
	}
}

func TestTailBufferBytesIsACopy(t *testing.T) {
	b := &tierkit.TailBuffer{Max: 4}
	b.Write([]byte("abcdef"))
	got := b.Bytes()
	got[0] = 'X'
	if string(b.Bytes()) != "cdef" {
		t.Fatalf("mutating Bytes() changed the buffer: %q", b.Bytes())
	}
	b.Write([]byte("g"))
	if string(got) != "Xdef" {
		t.Fatalf("Write changed an earlier Bytes() result: %q", got)
	}
}

// TestTailBufferNoAllocs checks that a full buffer is a ring: writes do not
// allocate however much goes through it.
func TestTailBufferNoAllocs(t *testing.T) {
	b := &tierkit.TailBuffer{Max: 1000}
	b.Write(make([]byte, 1000))
	small := []byte("0123456789abcdefghijklmnopqrstu") // 31 bytes, never aligned
	if n := testing.AllocsPerRun(1000, func() { b.Write(small) }); n != 0 {
		t.Errorf("Write into a full ring allocates %v times", n)
	}
	big := make([]byte, 5000)
	if n := testing.AllocsPerRun(100, func() { b.Write(big) }); n != 0 {
		t.Errorf("Write larger than Max allocates %v times", n)
	}
}

// TestTailBufferRandom compares TailBuffer with the naive reference over
// random Max values and write sizes, wrapping the ring many times.
func TestTailBufferRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x80\xff")
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	for i := range iters {
		max := 1 + rng.IntN(64)
		b := &tierkit.TailBuffer{Max: max}
		ref := &naiveTail{max: max}
		for w := range 1 + rng.IntN(40) {
			var n int
			switch rng.IntN(4) {
			case 0:
				n = rng.IntN(3) // tiny, including empty
			case 1:
				n = max // exactly Max
			case 2:
				n = max + rng.IntN(2*max) // more than Max
			default:
				n = rng.IntN(max)
			}
			p := make([]byte, n)
			for j := range p {
				p[j] = alphabet[rng.IntN(len(alphabet))]
			}
			if got, err := b.Write(p); got != n || err != nil {
				t.Fatalf("Write = %d, %v; want %d, nil", got, err, n)
			}
			ref.Write(p)
			compareTail(t, b, ref, fmt.Sprintf("iteration %d max %d write %d", i, max, w))
		}
	}
}

func FuzzTailBuffer(f *testing.F) {
	f.Add(uint8(4), []byte("abcdefgh"), []byte{1, 2, 3})
	f.Add(uint8(1), []byte("xyz"), []byte{0, 0, 1})
	f.Add(uint8(3), []byte("a€b€c😀"), []byte{2, 5, 1, 7})
	f.Add(uint8(0), []byte("hello"), []byte{})
	f.Add(uint8(16), bytes.Repeat([]byte("\x80"), 40), []byte{16, 16, 1})
	f.Fuzz(func(t *testing.T, max uint8, data []byte, sizes []byte) {
		// Max 0 would mean DefaultMaxOutput; keep it small so the ring is
		// exercised, but still test the zero value's default on Max == 0.
		b := &tierkit.TailBuffer{Max: int(max)}
		ref := &naiveTail{max: int(max)}
		for _, s := range sizes {
			if len(data) == 0 {
				break
			}
			n := min(int(s), len(data))
			b.Write(data[:n])
			ref.Write(data[:n])
			data = data[n:]
			compareTail(t, b, ref, "fuzz")
		}
		b.Write(data)
		ref.Write(data)
		compareTail(t, b, ref, "fuzz rest")
	})
}

func BenchmarkTailBuffer(b *testing.B) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048) // 32 KiB
	var tb tierkit.TailBuffer
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		tb.Write(chunk)
	}
}
