package tool

import (
	"sync"

	"github.com/hutchsandbox/hutch/permission"
)

// catalog returns every tool, in the order they are offered. It is built
// on first use, not at program start: encoding the schemas took ~360
// allocations in every hutch process, most of which never offer a tool.
// Callers must not modify the slice or its schemas.
var catalog = sync.OnceValue(func() []Tool {
	return []Tool{
		{
			Name: "read_file",
			Description: "Read a text file inside the sandbox. Paths are relative to the sandbox root. " +
				"Optional offset (1-based first line) and limit (number of lines) select a window. " +
				"At most 200000 bytes are returned; binary files are reported, not shown.",
			InputSchema: schema([]string{"path"}, map[string]map[string]any{
				"path":   str("file path, relative to the sandbox root"),
				"offset": integer("first line to return, counting from 1", 1),
				"limit":  integer("how many lines to return", 1),
			}),
			Capability: permission.Read,
			Title:      "Read file",
			Hints:      Hints{ReadOnly: true, Idempotent: true},
			call:       readFile,
		},
		{
			Name:        "glob",
			Description: `List files matching a glob pattern ("**/*.go", "src/*.ts"). "**" crosses directories, "*" does not. A pattern ending in "/" lists directories instead of files. Results are relative to the sandbox root, sorted.`,
			InputSchema: schema([]string{"pattern"}, map[string]map[string]any{
				"pattern": str("glob pattern, relative to the sandbox root"),
			}),
			Capability:   permission.Glob,
			Title:        "Find files",
			Hints:        Hints{ReadOnly: true, Idempotent: true},
			OutputSchema: outputSchema[GlobResult](),
			call:         globFiles,
		},
		{
			Name: "write_file",
			Description: "Create or replace a file with the given content; missing directories are created. " +
				"An existing file must have been read in this session first, and must not have changed since.",
			InputSchema: schema([]string{"content", "path"}, map[string]map[string]any{
				"path":    str("file path, relative to the sandbox root"),
				"content": str("the complete new content of the file"),
			}),
			Capability:   permission.Write,
			Title:        "Write file",
			Hints:        Hints{Destructive: true, Idempotent: true},
			OutputSchema: outputSchema[WriteResult](),
			call:         writeFile,
		},
		{
			Name: "edit_file",
			Description: "Replace an exact piece of text in a file. old_string must match exactly once " +
				"(or set replace_all). Read the file first.",
			InputSchema: schema([]string{"new_string", "old_string", "path"}, map[string]map[string]any{
				"path":        str("file path, relative to the sandbox root"),
				"old_string":  str("the exact text to replace"),
				"new_string":  str("the replacement text"),
				"replace_all": {"type": "boolean", "description": "replace every occurrence instead of exactly one"},
			}),
			Capability:   permission.Write,
			Title:        "Edit file",
			Hints:        Hints{Destructive: true},
			OutputSchema: outputSchema[EditResult](),
			call:         editFile,
		},
		{
			Name: "shell",
			Description: "Run a shell command (/bin/sh -c) in the sandbox root. Returns exit_code, stdout, stderr and timed_out; " +
				"each stream is cut to its last 200 lines and 16000 characters. Default timeout 120 seconds.",
			InputSchema: schema([]string{"command"}, map[string]map[string]any{
				"command": str("the command line"),
				"timeout": {"type": "number", "description": "seconds before the command and everything it started are stopped", "exclusiveMinimum": 0, "maximum": MaxShellTimeout.Seconds()},
			}),
			Capability:   permission.Shell,
			Title:        "Run shell command",
			Hints:        Hints{Destructive: true, OpenWorld: true},
			OutputSchema: outputSchema[ShellResult](),
			call:         runShell,
		},
		{
			Name:        "fetch",
			Description: "Fetch an http or https URL from an allowed host and return its body (at most 200000 bytes). Redirects are followed only to allowed hosts.",
			InputSchema: schema([]string{"url"}, map[string]map[string]any{
				"url": str("the URL to fetch"),
			}),
			Capability:   permission.Fetch,
			Title:        "Fetch URL",
			Hints:        Hints{ReadOnly: true, OpenWorld: true},
			OutputSchema: outputSchema[FetchOutput](),
			call:         fetchURL,
		},
		{
			Name:        "web_search",
			Description: "Search the web. Returns at most 8 results with title, url and a short snippet.",
			InputSchema: schema([]string{"query"}, map[string]map[string]any{
				"query": str("what to search for"),
			}),
			Capability:   permission.Search,
			Title:        "Search the web",
			Hints:        Hints{ReadOnly: true, OpenWorld: true},
			OutputSchema: outputSchema[WebSearchResult](),
			call:         webSearch,
		},
	}
})
