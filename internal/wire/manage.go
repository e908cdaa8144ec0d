package wire

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxAnswerBytes bounds a list or search answer in bytes, as it travels
// through a pipe (or as data frames): a whole listing of MaxGlobResults
// entries at about 300 bytes each, or a search's MaxSearchBytes of text
// with its paths and context.
const MaxAnswerBytes = 64 << 20

// listing is how a List answer travels: JSON, with every path quoted
// (see quoteWords) when any of them is not UTF-8.
type listing struct {
	Entries []sandbox.FileInfo `json:"entries"`
	Quoted  bool               `json:"quoted,omitempty"`
}

// WriteListing writes a List answer to w.
func WriteListing(w io.Writer, entries []sandbox.FileInfo) error {
	l := listing{Entries: entries}
	ws := make([]*string, len(entries))
	if slices.ContainsFunc(entries, func(e sandbox.FileInfo) bool { return invalid(&e.Path) }) {
		l.Entries = slices.Clone(entries)
		for i := range l.Entries {
			ws[i] = &l.Entries[i].Path
		}
		l.Quoted = quoteWords(ws...)
	}
	return json.NewEncoder(w).Encode(l)
}

// ReadListing decodes what WriteListing wrote.
func ReadListing(b []byte) ([]sandbox.FileInfo, error) {
	var l listing
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("a listing from the sandbox: %w", err)
	}
	if l.Quoted {
		for i := range l.Entries {
			if err := unquoteWords(&l.Entries[i].Path); err != nil {
				return nil, err
			}
		}
	}
	if l.Entries == nil {
		l.Entries = []sandbox.FileInfo{}
	}
	return l.Entries, nil
}

// searchAnswer is how a Search answer travels: JSON, with every path
// quoted when any of them is not UTF-8 (the lines shown are text, made
// UTF-8 by the search itself).
type searchAnswer struct {
	Result sandbox.SearchResult `json:"result"`
	Quoted bool                 `json:"quoted,omitempty"`
}

func (a *searchAnswer) paths() []*string {
	var ws []*string
	for i := range a.Result.Matches {
		ws = append(ws, &a.Result.Matches[i].Path)
	}
	for i := range a.Result.Files {
		ws = append(ws, &a.Result.Files[i].Path)
	}
	return ws
}

// WriteSearch writes a Search answer to w.
func WriteSearch(w io.Writer, res sandbox.SearchResult) error {
	a := searchAnswer{Result: res}
	a.Result.Matches, a.Result.Files = slices.Clone(res.Matches), slices.Clone(res.Files)
	a.Quoted = quoteWords(a.paths()...)
	return json.NewEncoder(w).Encode(a)
}

// ReadSearch decodes what WriteSearch wrote.
func ReadSearch(b []byte) (sandbox.SearchResult, error) {
	var a searchAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return sandbox.SearchResult{}, fmt.Errorf("a search answer from the sandbox: %w", err)
	}
	if a.Quoted {
		if err := unquoteWords(a.paths()...); err != nil {
			return sandbox.SearchResult{}, err
		}
	}
	return a.Result, nil
}
