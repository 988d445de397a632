/**
 * The config files git reads beside a repository's own: the system's and the user's. Warden
 * reads them where it does git's work itself (a step's listing, a step's commit), to leave to git
 * whatever they could change.
 */
import { realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

/** `$XDG_CONFIG_HOME`, or `~/.config`, as git finds it. */
export function xdgConfigHome(): string {
  return process.env.XDG_CONFIG_HOME || path.join(process.env.HOME ?? homedir(), '.config');
}

/**
 * The system and user config files git would read (missing ones included): the system's, unless
 * GIT_CONFIG_NOSYSTEM says not to (GIT_CONFIG_SYSTEM names it, else /etc/gitconfig and
 * `etc/gitconfig` under the prefix of the git on PATH), and the user's (GIT_CONFIG_GLOBAL, else
 * `~/.gitconfig` and the XDG one).
 */
export function userConfigFiles(): string[] {
  const home = process.env.HOME ?? homedir();
  const system = gitBoolean(process.env.GIT_CONFIG_NOSYSTEM) ? [] : process.env.GIT_CONFIG_SYSTEM !== undefined ? [process.env.GIT_CONFIG_SYSTEM] : systemConfigs();
  const global = process.env.GIT_CONFIG_GLOBAL !== undefined ? [process.env.GIT_CONFIG_GLOBAL] : [path.join(home, '.gitconfig'), path.join(xdgConfigHome(), 'git', 'config')];
  return [...system, ...global].filter(Boolean);
}

/** True for the values git reads as true in a boolean environment variable. */
function gitBoolean(value: string | undefined): boolean {
  return value !== undefined && !['', '0', 'false', 'no', 'off'].includes(value.toLowerCase());
}

let systemConfigFiles: string[] | undefined;

/**
 * Where git's system config may be: /etc/gitconfig, and `etc/gitconfig` under the prefix of the
 * git found on PATH (a build installed under /usr/local or /opt keeps it there). Found once.
 */
function systemConfigs(): string[] {
  if (!systemConfigFiles) {
    const found = new Set(['/etc/gitconfig']);
    for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
      try {
        // The prefix the folder on PATH is in (a link farm's, like Homebrew's), and the one the link leads to.
        const git = realpathSync(path.join(dir, 'git'));
        found.add(path.join(path.dirname(dir), 'etc', 'gitconfig'));
        found.add(path.join(path.dirname(path.dirname(git)), 'etc', 'gitconfig'));
        break;
      } catch {
        // not in this folder
      }
    }
    systemConfigFiles = [...found];
  }
  return systemConfigFiles;
}
