// The arguments inspector.test.mjs calls each tool with, once, through the
// MCP Inspector CLI (one session per call), on a root holding a.txt,
// b.txt and c.txt. A tool tools/list returns that is not here fails that
// test: add its entry when you add a tool.
//
//   args:  the tool's arguments
//   error: when set, the call is expected to come back as an isError result
//          whose text matches it (a tool that needs an earlier call of the
//          same session, which one CLI call cannot give it)
export const toolArgs = {
  read_file: { args: { path: 'a.txt' } },
  glob: { args: { pattern: '*.txt' } },
  grep: { args: { pattern: 'alpha' } },
  list: { args: {} },
  write_file: { args: { path: 'new.txt', content: 'written\n' } },
  edit_file: { args: { path: 'a.txt', old_string: 'alpha', new_string: 'beta' }, error: /read/i },
  apply_patch: { args: { patch: '--- /dev/null\n+++ b/patched.txt\n@@ -0,0 +1 @@\n+patched\n' } },
  move: { args: { from: 'b.txt', to: 'moved.txt' } },
  delete: { args: { path: 'c.txt' } },
  mkdir: { args: { path: 'newdir' } },
  shell: { args: { command: 'echo from the inspector' } },
  process_list: { args: {} },
  process_output: { args: { id: 'none' }, error: /none|no .*process|unknown/i },
  process_input: { args: { id: 'none', data: 'x\n' }, error: /none|no .*process|unknown/i },
  process_kill: { args: { id: 'none' }, error: /none|no .*process|unknown/i },
};
