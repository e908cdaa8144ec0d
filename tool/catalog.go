package tool

import (
	"fmt"
	"maps"
	"sync"

	"github.com/hutchsandbox/hutch/internal/patch"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// catalog returns every tool, in the order they are offered. It is built
// on first use, not at program start: encoding the schemas took ~360
// allocations in every hutch process, most of which never offer a tool.
// Callers must not modify the slice or its schemas.
var catalog = sync.OnceValue(func() []Tool {
	return []Tool{
		{
			Name: "read_file",
			Description: fmt.Sprintf("Read a file inside the sandbox (path), or up to %d files (paths), each under a ==> path <== header. Paths are relative to the sandbox root. "+
				"offset (first line, counting from 1; negative counts from the end: -20 is the last 20 lines) and limit (number of lines) select a window; line_numbers prefixes each line with its number. "+
				"At most %d bytes are returned in all, with a note saying how to read on. Text that is not UTF-8 is shown with U+FFFD for the bytes that are not, and says so. "+
				"PNG, JPEG, GIF and WebP images up to %d bytes come back as images; other binary files (a NUL byte near the start) are described, not shown.", MaxReadPaths, MaxReadBytes, MaxImageBytes),
			InputSchema: schema(nil, map[string]map[string]any{
				"path":         str("file path, relative to the sandbox root"),
				"paths":        {"type": "array", "items": map[string]any{"type": "string"}, "maxItems": MaxReadPaths, "description": "several file paths to read in one call (instead of path)"},
				"offset":       {"type": "integer", "description": "first line to return, counting from 1; negative: that many lines from the end"},
				"limit":        integer("how many lines to return", 1),
				"line_numbers": {"type": "boolean", "description": "prefix each line with its number"},
			}),
			Capability: permission.Read,
			Title:      "Read file",
			Hints:      Hints{ReadOnly: true, Idempotent: true},
			call:       readFile,
		},
		{
			Name: "glob",
			Description: `List files matching a glob pattern ("**/*.go", "src/*.ts"). "**" crosses directories, "*" does not. A pattern ending in "/" lists directories instead of files. ` +
				`Results are relative to the sandbox root, sorted, at most 100000 bytes of names (more says how many were left out). ` +
				`Files that .gitignore files name, and .git, are skipped unless include_ignored is true.`,
			InputSchema: schema([]string{"pattern"}, map[string]map[string]any{
				"pattern":         str("glob pattern, relative to the sandbox root"),
				"include_ignored": {"type": "boolean", "description": "also list what .gitignore files name"},
			}),
			Capability:   permission.Glob,
			Title:        "Find files",
			Hints:        Hints{ReadOnly: true, Idempotent: true},
			OutputSchema: outputSchema[GlobResult](),
			call:         globFiles,
		},
		{
			Name:  "grep",
			Title: "Search file contents",
			Description: fmt.Sprintf("Search file contents for a regular expression (Go RE2 syntax: no backreferences or lookaround; literal: true for plain text), line by line like grep -n. "+
				"path narrows to a directory or file; glob selects files (\"*.go\" matches at any depth, \"src/**/*.ts\" under src). "+
				"Skips binary files, .git, and what .gitignore files name (include_ignored: true searches those too). "+
				"output: content (default: matching lines with line numbers and context lines), files (matching paths) or count (matches per file). "+
				"At most limit results (default %d, at most %d) and %d KiB of text; more says how many were left out.", sandbox.DefaultSearchLimit, sandbox.MaxSearchLimit, sandbox.MaxSearchBytes>>10),
			InputSchema: schema([]string{"pattern"}, map[string]map[string]any{
				"pattern":         str("regular expression (RE2), or plain text with literal"),
				"path":            str("directory or file to search, relative to the sandbox root (default: the root)"),
				"glob":            str("which files to search, as a glob pattern"),
				"ignore_case":     {"type": "boolean", "description": "match letters in either case"},
				"literal":         {"type": "boolean", "description": "take pattern as plain text"},
				"context":         map[string]any{"type": "integer", "minimum": 0, "maximum": sandbox.MaxSearchContext, "description": "lines of context before and after each match"},
				"output":          {"type": "string", "enum": []string{"content", "files", "count"}, "description": "what to report"},
				"limit":           map[string]any{"type": "integer", "minimum": 1, "maximum": sandbox.MaxSearchLimit, "description": "the most matches (or files) to report"},
				"include_ignored": {"type": "boolean", "description": "also search what .gitignore files name"},
			}),
			OutputSchema: outputSchema[GrepResult](),
			Hints:        Hints{ReadOnly: true, Idempotent: true},
			Capability:   permission.Read,
			call:         grepFiles,
		},
		{
			Name:  "list",
			Title: "List directory",
			Description: fmt.Sprintf("List a directory's entries with kind (file, dir, other) and size, sorted. depth (1 to %d, default 1) descends into subdirectories, breadth first; links are shown as links and not descended. "+
				"At most %d entries; more says how many were left out. Nothing is skipped for .gitignore.", MaxListDepth, MaxListEntries),
			InputSchema: schema(nil, map[string]map[string]any{
				"path":  str("directory, relative to the sandbox root (default: the root)"),
				"depth": integer("how many levels to show (1: the directory's own entries)", 1),
			}),
			OutputSchema: outputSchema[ListResult](),
			Hints:        Hints{ReadOnly: true, Idempotent: true},
			Capability:   permission.Read,
			call:         listDir,
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
				"(or set replace_all). Several replacements go in edits, applied in order, all or none. " +
				"Answers with a unified diff of the change; dry_run shows the diff without writing. Read the file first.",
			InputSchema: schema([]string{"path"}, withProps(replacement("the exact text to replace (or use edits)"), map[string]map[string]any{
				"path": str("file path, relative to the sandbox root"),
				"edits": {
					"type":        "array",
					"description": fmt.Sprintf("several replacements, each applied to the text the ones before it left; if one cannot apply, none is (at most %d)", MaxEdits),
					"maxItems":    MaxEdits,
					"items": map[string]any{
						"type":                 "object",
						"required":             []string{"new_string", "old_string"},
						"additionalProperties": false,
						"properties":           replacement("the exact text to replace"),
					},
				},
				"dry_run": {"type": "boolean", "description": "check the edits and answer with the diff, writing nothing"},
			})),
			Capability:   permission.Write,
			Title:        "Edit file",
			Hints:        Hints{Destructive: true},
			OutputSchema: outputSchema[EditResult](),
			call:         editFile,
		},
		{
			Name:  "apply_patch",
			Title: "Apply patch",
			Description: fmt.Sprintf("Apply a unified diff (as git diff or diff -u prints it: --- a/path, +++ b/path, @@ hunks; new files from /dev/null, deletions to /dev/null, renames with rename from/rename to) to files in the sandbox, all or nothing. "+
				"Each hunk applies at its line, or where its context and removed lines match exactly nearest to it; nothing is applied by similarity. "+
				"Every existing file it changes, deletes or renames must have been read in this session first; a new file must not exist. "+
				"Binary patches and copies are refused; at most %d files and %d bytes of patch.", MaxPatchFiles, patch.MaxSize),
			InputSchema: schema([]string{"patch"}, map[string]map[string]any{
				"patch": str("the unified diff; paths relative to the sandbox root"),
			}),
			Capability:   permission.Write,
			Hints:        Hints{Destructive: true},
			OutputSchema: outputSchema[PatchResult](),
			call:         applyPatch,
		},
		{
			Name:  "move",
			Title: "Move or rename",
			Description: "Move or rename a file, link or directory inside the sandbox; missing directories of to are created. " +
				"A file already at to is replaced, and must have been read in this session first; a directory at to is refused.",
			InputSchema: schema([]string{"from", "to"}, map[string]map[string]any{
				"from": str("what to move, relative to the sandbox root"),
				"to":   str("its new path (the full path, not the directory to move into)"),
			}),
			OutputSchema: outputSchema[MoveResult](),
			Hints:        Hints{Destructive: true},
			Capability:   permission.Write,
			call:         moveFile,
		},
		{
			Name:  "delete",
			Title: "Delete",
			Description: "Delete a file, a link (never what it points to) or an empty directory; a directory with entries only with recursive, " +
				"which deletes everything in it. The sandbox root cannot be deleted.",
			InputSchema: schema([]string{"path"}, map[string]map[string]any{
				"path":      str("what to delete, relative to the sandbox root"),
				"recursive": {"type": "boolean", "description": "also delete a directory that has entries, with everything in it"},
			}),
			OutputSchema: outputSchema[PathResult](),
			Hints:        Hints{Destructive: true, Idempotent: true},
			Capability:   permission.Write,
			call:         deletePath,
		},
		{
			Name:        "mkdir",
			Title:       "Make directory",
			Description: "Create a directory and any missing parents. An existing directory is fine.",
			InputSchema: schema([]string{"path"}, map[string]map[string]any{
				"path": str("the directory, relative to the sandbox root"),
			}),
			OutputSchema: outputSchema[PathResult](),
			Hints:        Hints{Idempotent: true},
			Capability:   permission.Write,
			call:         makeDir,
		},
		{
			Name:  "shell",
			Title: "Run shell command",
			Description: "Run a shell command (/bin/sh -c). Each call is a fresh shell that starts in the sandbox root (or dir, inside it), with empty standard input unless stdin is given; " +
				"nothing (working directory, variables) carries over between calls. Returns exit_code, stdout, stderr and timed_out; " +
				"a non-zero exit_code is the command's own result, not a failure of the tool. " +
				"Each stream is cut to its last 200 lines and 16000 characters. Default timeout 120 seconds. " +
				"background: true starts the command and answers at once with an id (its timeout then defaults to the maximum); " +
				"read its output with process_output, write to it with process_input, end it with process_kill. Background processes end with the session.",
			InputSchema: schema([]string{"command"}, map[string]map[string]any{
				"command":    str("the command line"),
				"timeout":    {"type": "number", "description": "seconds before the command and everything it started are stopped", "exclusiveMinimum": 0, "maximum": MaxShellTimeout.Seconds()},
				"dir":        str("where the command starts, relative to the sandbox root (default: the root)"),
				"stdin":      str("the command's standard input"),
				"background": {"type": "boolean", "description": "start the command in the background and answer at once with its id"},
			}),
			OutputSchema: outputSchemaOneOf[ShellResult, BackgroundStarted](),
			Hints:        Hints{Destructive: true, OpenWorld: true},
			Capability:   permission.Shell,
			call:         runShell,
		},
		{
			Name:  "process_output",
			Title: "Read background output",
			Description: fmt.Sprintf("Read what a background process (shell with background: true) printed, stdout and stderr as they came, and whether it has ended (with its exit_code). "+
				"since is the offset to read from (next of the previous answer; 0 for everything still kept: the last %d bytes); without it, only what comes from now. "+
				"wait_ms (at most %d) waits for new output or the end. At most %d bytes per answer (more says there is more).", MaxProcessLog, MaxProcessWait.Milliseconds(), MaxProcessChunk),
			InputSchema: schema([]string{"id"}, map[string]map[string]any{
				"id":      str("the id shell answered with"),
				"since":   integer("the offset to read from: next of the previous answer", 0),
				"wait_ms": integer("how long to wait for new output or the end, in milliseconds", 0),
			}),
			OutputSchema: outputSchema[ProcessOutput](),
			Hints:        Hints{ReadOnly: true},
			Capability:   permission.Shell,
			call:         processOutput,
		},
		{
			Name:        "process_input",
			Title:       "Write to background process",
			Description: "Write data to a background process's standard input; eof: true closes it afterwards.",
			InputSchema: schema([]string{"data", "id"}, map[string]map[string]any{
				"id":   str("the id shell answered with"),
				"data": str("what to write (add a newline to end a line)"),
				"eof":  {"type": "boolean", "description": "close the process's input after data"},
			}),
			OutputSchema: outputSchema[ProcessInputResult](),
			Hints:        Hints{Destructive: true, OpenWorld: true},
			Capability:   permission.Shell,
			call:         processInput,
		},
		{
			Name:        "process_kill",
			Title:       "Stop background process",
			Description: "Stop a background process and everything it started; answers with how it ended.",
			InputSchema: schema([]string{"id"}, map[string]map[string]any{
				"id": str("the id shell answered with"),
			}),
			OutputSchema: outputSchema[ProcessStatus](),
			Hints:        Hints{Destructive: true, Idempotent: true},
			Capability:   permission.Shell,
			call:         processKill,
		},
		{
			Name:         "process_list",
			Title:        "List background processes",
			Description:  "List this session's background processes: id, command, whether each still runs, its exit status once ended, and how much it printed.",
			InputSchema:  schema(nil, map[string]map[string]any{}),
			OutputSchema: outputSchema[ProcessList](),
			Hints:        Hints{ReadOnly: true, Idempotent: true},
			Capability:   permission.Shell,
			call:         processList,
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

// replacement is the schema of one edit_file replacement's fields, with
// old_string described as old.
func replacement(old string) map[string]map[string]any {
	return map[string]map[string]any{
		"old_string":  str(old),
		"new_string":  str("the replacement text"),
		"replace_all": {"type": "boolean", "description": "replace every occurrence instead of exactly one"},
	}
}

// withProps is the properties of a and b together (b's win).
func withProps(a, b map[string]map[string]any) map[string]map[string]any {
	maps.Copy(a, b)
	return a
}
