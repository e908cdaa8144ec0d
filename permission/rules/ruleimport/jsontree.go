package ruleimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jnode is a JSON value with the line it starts on, so that every entry
// of a settings file can be named by file:line.
type jnode struct {
	line  int
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str   string
	b     bool
	keys  []string // object keys, in order
	vals  []*jnode // object values
	items []*jnode // array items
}

// maxJSONDepth bounds nesting, so a hostile file cannot exhaust the stack.
const maxJSONDepth = 64

// parseJSON reads one JSON value (and nothing after it) into a tree.
func parseJSON(data []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &jparser{dec: dec, data: data}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: more than one JSON value: keep one object per file", p.line())
	}
	return n, nil
}

// readJSONObject reads file as one JSON object (what names the file in
// the error when it is another value).
func readJSONObject(file, what string) (*jnode, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	n, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrImport, file, oneLine(err))
	}
	if n.kind != 'o' {
		return nil, fmt.Errorf("%w: %s: %s is a JSON object, not %s", ErrImport, file, what, n.kindName())
	}
	return n, nil
}

type jparser struct {
	dec  *json.Decoder
	data []byte
}

// line is the line of the last token read.
func (p *jparser) line() int { return lineOf(p.data, int(p.dec.InputOffset())-1) }

func (p *jparser) value(depth int) (*jnode, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("line %d: nested more than %d deep", p.line(), maxJSONDepth)
	}
	tok, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file: write a JSON object")
		}
		return nil, fmt.Errorf("line %d: %s", p.line(), oneLine(err))
	}
	n := &jnode{line: p.line()}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = 'o'
			for p.dec.More() {
				kt, err := p.dec.Token()
				if err != nil {
					return nil, fmt.Errorf("line %d: %s", p.line(), oneLine(err))
				}
				k, _ := kt.(string)
				v, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			}
		case '[':
			n.kind = 'a'
			for p.dec.More() {
				v, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		}
		if _, err := p.dec.Token(); err != nil { // the closing delimiter
			return nil, fmt.Errorf("line %d: %s", p.line(), oneLine(err))
		}
	case string:
		n.kind, n.str = 's', t
	case json.Number:
		n.kind, n.str = 'n', t.String()
	case bool:
		n.kind, n.b = 'b', t
	case nil:
		n.kind = 'z'
	}
	return n, nil
}

// kindName names a node's kind for messages.
func (n *jnode) kindName() string {
	switch n.kind {
	case 'o':
		return "an object"
	case 'a':
		return "a list"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "true or false"
	}
	return "null"
}

// strings is an array of strings, or an error naming the first item
// that is not one.
func (n *jnode) strings() ([]*jnode, error) {
	if n.kind != 'a' {
		return nil, fmt.Errorf("is %s, not a list of strings", n.kindName())
	}
	for _, it := range n.items {
		if it.kind != 's' {
			return nil, fmt.Errorf("line %d: an entry is %s, not a string", it.line, it.kindName())
		}
	}
	return n.items, nil
}
