package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func frameBytes(t FrameType, id uint64, payload []byte) []byte {
	var b bytes.Buffer
	if err := NewFrameWriter(&b).WriteFrame(t, id, payload); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	fw := NewFrameWriter(&b)
	frames := []Frame{
		{FrameHello, 0, []byte(`{"version":1}`)},
		{FrameRequest, 7, []byte(`{"op":"stat"}`)},
		{FrameData, 7, bytes.Repeat([]byte{0, 0xff}, 1000)},
		{FrameStdout, 1 << 60, []byte("x")},
		{FrameClose, 3, []byte{byte(FrameStdin)}},
		{FrameClose, 3, []byte{byte(FrameStdout)}},
		{FrameClose, 3, []byte{byte(FrameStderr)}},
		{FrameCredit, 3, CreditPayload(FrameStdout, StreamWindow)},
		{FrameCancel, 9, nil},
	}
	for _, f := range frames {
		if err := fw.WriteFrame(f.Type, f.ID, f.Payload); err != nil {
			t.Fatal(err)
		}
	}
	fr := NewFrameReader(&b)
	for _, want := range frames {
		got, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading %v: %v", want.Type, err)
		}
		if got.Type != want.Type || got.ID != want.ID || !bytes.Equal(got.Payload, want.Payload) {
			t.Errorf("got %v %d %q, want %v %d %q", got.Type, got.ID, got.Payload, want.Type, want.ID, want.Payload)
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	if s, n := Credit(frames[7]); s != FrameStdout || n != StreamWindow {
		t.Errorf("credit decodes to %v %d", s, n)
	}
}

func TestFrameDecoderIsStrict(t *testing.T) {
	oversize := make([]byte, FrameHeaderSize)
	binary.BigEndian.PutUint32(oversize, MaxFramePayload+1)
	oversize[4] = byte(FrameData)
	oversize[12] = 1
	cases := map[string][]byte{
		"unknown type":         frameBytes(FrameType(99), 1, []byte("x")),
		"type zero":            frameBytes(FrameType(0), 1, nil),
		"oversized":            oversize,
		"hello with an id":     frameBytes(FrameHello, 1, []byte(`{}`)),
		"request with id 0":    frameBytes(FrameRequest, 0, []byte(`{}`)),
		"request not json":     frameBytes(FrameRequest, 1, []byte(`xx`)),
		"empty data":           frameBytes(FrameData, 1, nil),
		"stdout over a chunk":  frameBytes(FrameStdout, 1, make([]byte, StreamChunk+1)),
		"close of the hello":   frameBytes(FrameClose, 1, []byte{byte(FrameHello)}),
		"close too long":       frameBytes(FrameClose, 1, []byte{byte(FrameData), 0}),
		"credit short":         frameBytes(FrameCredit, 1, []byte{byte(FrameStdin), 0, 0, 1}),
		"credit zero":          frameBytes(FrameCredit, 1, CreditPayload(FrameStdin, 0)),
		"credit over a window": frameBytes(FrameCredit, 1, CreditPayload(FrameStdin, StreamWindow+1)),
		"credit for data":      frameBytes(FrameCredit, 1, CreditPayload(FrameData, 1)),
		"cancel with payload":  frameBytes(FrameCancel, 1, []byte("x")),
	}
	for name, b := range cases {
		_, err := NewFrameReader(bytes.NewReader(b)).ReadFrame()
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
	whole := frameBytes(FrameData, 1, []byte("abcdef"))
	for cut := 1; cut < len(whole); cut++ {
		_, err := NewFrameReader(bytes.NewReader(whole[:cut])).ReadFrame()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	if err := NewFrameWriter(io.Discard).WriteFrame(FrameData, 1, make([]byte, MaxFramePayload+1)); err == nil {
		t.Error("writing an oversized frame must fail")
	}
}

func TestDecodeJSONIsStrict(t *testing.T) {
	var r StreamRequest
	if err := DecodeJSON([]byte(`{"op":"read","path":"YQ=="}`), &r); err != nil || r.Op != "read" || string(r.Path) != "a" {
		t.Errorf("valid request: %+v, %v", r, err)
	}
	for _, bad := range []string{`{"op":"read","nope":1}`, `{"op":"read"} {}`, `{"op":"read"} x`, `{"op":`, `[]`, `{"path":"not base64!"}`} {
		if err := DecodeJSON([]byte(bad), &r); !errors.Is(err, ErrProtocol) {
			t.Errorf("DecodeJSON(%s) = %v, want ErrProtocol", bad, err)
		}
	}
}

// Paths that are not valid UTF-8 survive the trip (they travel as bytes).
func TestRequestKeepsRawBytes(t *testing.T) {
	var b bytes.Buffer
	in := StreamRequest{Op: "write", Path: []byte("bad\xff\xfename"), Argv: [][]byte{[]byte("\x80")}}
	if err := NewFrameWriter(&b).WriteJSON(FrameRequest, 1, in); err != nil {
		t.Fatal(err)
	}
	f, err := NewFrameReader(&b).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var out StreamRequest
	if err := DecodeJSON(f.Payload, &out); err != nil || !bytes.Equal(out.Path, in.Path) || !bytes.Equal(out.Argv[0], in.Argv[0]) {
		t.Errorf("got %q %q, %v", out.Path, out.Argv, err)
	}
}

func TestWindowAndInbox(t *testing.T) {
	w := NewWindow()
	if n := w.Take(StreamWindow + 10); n != StreamWindow {
		t.Fatalf("Take = %d, want the whole window", n)
	}
	got := make(chan int)
	go func() { got <- w.Take(10) }()
	select {
	case n := <-got:
		t.Fatalf("Take with an empty window returned %d", n)
	case <-time.After(50 * time.Millisecond):
	}
	if err := w.Add(4); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 4 {
		t.Errorf("after a credit of 4, Take = %d", n)
	}
	if err := w.Add(StreamWindow + 1); !errors.Is(err, ErrProtocol) {
		t.Errorf("credit over the window: %v", err)
	}
	w.Close()
	if n := w.Take(1); n != 0 {
		t.Errorf("Take after Close = %d", n)
	}

	q := NewInbox()
	if err := q.Put(make([]byte, StreamWindow)); err != nil {
		t.Fatal(err)
	}
	if err := q.Put([]byte("x")); !errors.Is(err, ErrProtocol) {
		t.Errorf("put over the window: %v", err)
	}
	c, ok := q.Next()
	if !ok || len(c) != StreamWindow {
		t.Fatalf("Next = %d bytes, %v", len(c), ok)
	}
	if err := q.Put([]byte("y")); err != nil {
		t.Fatal(err)
	}
	q.End()
	if err := q.Put([]byte("late")); !errors.Is(err, ErrProtocol) {
		t.Errorf("put after End: %v", err)
	}
	if c, ok := q.Next(); !ok || string(c) != "y" {
		t.Errorf("queued chunk after End: %q %v", c, ok)
	}
	if _, ok := q.Next(); ok {
		t.Error("Next after the end and the last chunk")
	}
	q2 := NewInbox()
	q2.Abort()
	if err := q2.Put([]byte("dropped")); err != nil {
		t.Errorf("put after Abort must be dropped quietly: %v", err)
	}
}

// Concurrent writers never interleave inside a frame.
func TestFrameWriterConcurrent(t *testing.T) {
	pr, pw := io.Pipe()
	fw := NewFrameWriter(pw)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				_ = fw.WriteFrame(FrameData, uint64(i+1), bytes.Repeat([]byte{byte('a' + i)}, 3000))
			}
		}()
	}
	go func() { wg.Wait(); pw.Close() }()
	fr := NewFrameReader(pr)
	n := 0
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Repeat([]byte{byte('a' + f.ID - 1)}, 3000); !bytes.Equal(f.Payload, want) {
			t.Fatalf("frame %d mixes writers", f.ID)
		}
		n++
	}
	if n != 400 {
		t.Errorf("%d frames, want 400", n)
	}
}

// FuzzReadFrame: whatever the bytes, the decoder never panics, never
// returns a frame that breaks the rules, and what it returns encodes back
// to the bytes it came from.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(FrameRequest, 1, []byte(`{"op":"read","path":"YQ=="}`)))
	f.Add(append(frameBytes(FrameStdout, 2, []byte("out")), frameBytes(FrameCredit, 2, CreditPayload(FrameStdin, 5))...))
	f.Add(frameBytes(FrameClose, 3, []byte{byte(FrameData)}))
	f.Add([]byte{0, 0, 0, 1, 8, 0, 0, 0, 0, 0, 0, 0, 1, 4})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data))
		var consumed []byte
		for {
			fm, err := fr.ReadFrame()
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				if err == io.EOF && !bytes.Equal(consumed, data) {
					t.Fatalf("clean EOF after %d of %d bytes", len(consumed), len(data))
				}
				return
			}
			if len(fm.Payload) > MaxFramePayload || CheckFrame(fm) != nil {
				t.Fatalf("returned a bad frame: %v %d %d bytes", fm.Type, fm.ID, len(fm.Payload))
			}
			enc := frameBytes(fm.Type, fm.ID, fm.Payload)
			if !bytes.HasPrefix(data[len(consumed):], enc) {
				t.Fatalf("frame does not re-encode to its bytes")
			}
			consumed = append(consumed, enc...)
			if fm.Type == FrameRequest || fm.Type == FrameResponse || fm.Type == FrameHello {
				var v map[string]any
				_ = DecodeJSON(fm.Payload, &v)
				var r StreamRequest
				_ = DecodeJSON(fm.Payload, &r)
				var s StreamResponse
				if DecodeJSON(fm.Payload, &s) == nil && s.Err != nil && strings.Contains(s.Err.Kind, "\x00") {
					_ = s.Err.Error()
				}
			}
		}
	})
}
