import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

/** The absolute path of an executable called `name` on `searchPath` (default: this process's PATH), if any. */
export function findExecutable(name: string, searchPath = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'): string | undefined {
  for (const dir of searchPath.split(':')) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      if (statSync(candidate).isFile()) {
        accessSync(candidate, constants.X_OK);
        return candidate;
      }
    } catch {
      // not here
    }
  }
  return undefined;
}
