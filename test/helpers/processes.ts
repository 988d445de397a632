import { readdirSync, readFileSync } from 'node:fs';

/** Command lines of the live processes whose command line contains `tag` (zombies left out). */
export function processesWith(tag: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').trim();
      if (cmdline.includes(tag)) found.push(cmdline);
    } catch {
      // gone
    }
  }
  return found;
}

/**
 * A shell snippet that prints the process group of the shell running it, as the host sees it.
 * `$$` will not do: at the none and process levels the command is the first process of a pid
 * namespace of its own, where `$$` is 1 (and `kill -- -1` from the host would hit everything).
 * /proc there is the host's, so /proc/self/stat shows host ids.
 */
export const PRINT_HOST_GROUP = "cut -d' ' -f5 /proc/self/stat";
