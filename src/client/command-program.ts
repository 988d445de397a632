import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

/** Words a shell handles itself: a command starting with one is not checked. */
const SHELL_WORDS = new Set([
  'if', 'then', 'else', 'elif', 'fi', 'case', 'esac', 'for', 'while', 'until', 'do', 'done', 'in', 'function', 'select', 'time',
  '{', '}', '[[', ']]', '!', '[', '.', ':', 'alias', 'cd', 'command', 'echo', 'eval', 'exec', 'exit', 'export', 'false', 'printf',
  'read', 'set', 'shift', 'source', 'test', 'true', 'trap', 'type', 'ulimit', 'umask', 'unset', 'wait',
]);

/**
 * The program a shell command line runs first, when it can be told without running a shell:
 * the first word after any `NAME=value` assignments, unquoted. Undefined when that word is the
 * shell's own (a keyword or builtin), or is built at run time ($VAR, `…`, globs, subshells).
 */
export function programOf(command: string): string | undefined {
  let i = 0;
  for (;;) {
    while (i < command.length && /[ \t]/.test(command[i]!)) i++;
    if (i >= command.length || /[\n;&|<>()]/.test(command[i]!)) return undefined;
    let word = '';
    let dynamic = false;
    while (i < command.length && !/[ \t\n;&|<>()]/.test(command[i]!)) {
      const c = command[i]!;
      if (c === "'") {
        const end = command.indexOf("'", i + 1);
        if (end < 0) return undefined;
        word += command.slice(i + 1, end);
        i = end + 1;
      } else if (c === '"') {
        const end = command.indexOf('"', i + 1);
        if (end < 0) return undefined;
        const inner = command.slice(i + 1, end);
        if (/[$`\\]/.test(inner)) dynamic = true;
        word += inner;
        i = end + 1;
      } else if (c === '\\') {
        word += command[i + 1] ?? '';
        i += 2;
      } else {
        if (/[$`*?[~]/.test(c)) dynamic = true;
        word += c;
        i++;
      }
    }
    if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(word)) continue; // an assignment: the program comes after it
    if (dynamic || SHELL_WORDS.has(word)) return undefined;
    return word;
  }
}

/**
 * Where `program` is: a path (with a slash, from `cwd`) that must be an executable file, or a
 * name looked up on PATH. Undefined when there is none.
 */
export function findProgram(program: string, cwd: string, pathVariable: string = process.env.PATH ?? ''): string | undefined {
  const candidates = program.includes('/')
    ? [path.resolve(cwd, program)]
    : pathVariable
        .split(path.delimiter)
        .filter(Boolean)
        .map((dir) => path.join(dir, program));
  return candidates.find(isExecutableFile);
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
