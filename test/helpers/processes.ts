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
