import { FORGE_KINDS, type ForgeKind } from '../shared/forge';
import { ForgeError, type ForgeRepository } from './forge-client';

/** The hosted forges whose kind and web address a remote's host alone tells. */
const HOSTED: Readonly<Record<string, ForgeKind>> = { 'github.com': 'github', 'gitlab.com': 'gitlab' };

export interface RemoteForgeSettings {
  /** The forge's kind; may be left out for github.com and gitlab.com. */
  readonly kind?: ForgeKind;
  /**
   * The forge's web address. Needed where the remote does not tell it: an SSH remote of a forge
   * that serves the web on another host or port, or a forge served under a path (`https://host/git`).
   */
  readonly webUrl?: string;
}

interface ParsedRemote {
  readonly host: string;
  /** The web origin when the remote is an http(s) address (credentials left out). */
  readonly httpOrigin?: string;
  /** The path on the server, without slashes at either end and without `.git`. */
  readonly path: string;
}

/**
 * Where a repository lives on its forge, from its git remote's address and the configured kind
 * and web address. Understands `http(s)://[user[:token]@]host[:port]/owner/name[.git]`,
 * `ssh://[user@]host[:port]/owner/name[.git]` and `user@host:owner/name[.git]`. GitLab paths may
 * carry groups (`group/sub/name`); Gitea's and GitHub's are exactly `owner/name`.
 */
export function forgeRepositoryFromRemote(remoteUrl: string, settings: RemoteForgeSettings = {}): ForgeRepository {
  const remote = parseRemote(remoteUrl.trim());
  const kind = settings.kind ?? HOSTED[remote.host.toLowerCase()];
  if (!kind) throw new ForgeError('invalid', `cannot tell which forge ${remote.host} is: set its kind (${FORGE_KINDS.join(', ')})`);
  if (!FORGE_KINDS.includes(kind)) throw new ForgeError('invalid', `unknown forge kind ${String(kind)}: use one of ${FORGE_KINDS.join(', ')}`);

  let webUrl: string;
  let repoPath = remote.path;
  if (settings.webUrl !== undefined) {
    const configured = parseWebUrl(settings.webUrl);
    webUrl = configured.href;
    // A forge served under a path has that path in its http remotes too.
    if (remote.httpOrigin !== undefined && configured.prefix && (repoPath === configured.prefix || repoPath.startsWith(`${configured.prefix}/`))) {
      repoPath = repoPath.slice(configured.prefix.length).replace(/^\/+/, '');
    }
  } else if (remote.httpOrigin !== undefined) {
    webUrl = remote.httpOrigin;
  } else if (HOSTED[remote.host.toLowerCase()]) {
    webUrl = `https://${remote.host.toLowerCase()}`;
  } else {
    throw new ForgeError('invalid', `the remote ${redacted(remoteUrl)} is reached over SSH, which does not tell the forge's web address: set it (e.g. https://${remote.host})`);
  }

  const segments = repoPath.split('/').filter(Boolean);
  const wanted = kind === 'gitlab' ? segments.length >= 2 : segments.length === 2;
  if (!wanted) {
    const shape = kind === 'gitlab' ? 'group[/subgroup…]/name' : 'owner/name';
    throw new ForgeError('invalid', `the remote ${redacted(remoteUrl)} does not name a ${kind} repository as ${shape} (its path is "${repoPath}")`);
  }
  return { kind, webUrl, path: segments.join('/') };
}

function parseRemote(remoteUrl: string): ParsedRemote {
  // scp-like: [user@]host:path, with no scheme (and not a Windows drive or a local path).
  const scp = /^(?:[^@/\s]+@)?([^:/\s]+):(?!\/\/)(.+)$/.exec(remoteUrl);
  if (scp && !remoteUrl.includes('://')) return { host: scp[1]!, path: trimPath(scp[2]!) };

  let url: URL;
  try {
    url = new URL(remoteUrl);
  } catch {
    throw new ForgeError('invalid', `${redacted(remoteUrl)} is not a git remote address this understands (http(s)://host/owner/name, ssh://host/owner/name or user@host:owner/name)`);
  }
  const path = trimPath(decodeURIComponent(url.pathname));
  if (url.protocol === 'http:' || url.protocol === 'https:') return { host: url.hostname, httpOrigin: `${url.protocol}//${url.host}`, path };
  if (url.protocol === 'ssh:' || url.protocol === 'git+ssh:') return { host: url.hostname, path };
  throw new ForgeError('invalid', `the remote ${redacted(remoteUrl)} uses ${url.protocol.replace(/:$/, '')}, which no forge API is reached from: use its http(s) or ssh address`);
}

/** The configured web address without a trailing slash, and the path it is served under. */
function parseWebUrl(webUrl: string): { href: string; prefix: string } {
  let url: URL;
  try {
    url = new URL(webUrl);
  } catch {
    throw new ForgeError('invalid', `the forge's web address ${webUrl} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ForgeError('invalid', `the forge's web address ${webUrl} is not http(s)`);
  const prefix = trimPath(url.pathname);
  return { href: `${url.protocol}//${url.host}${prefix ? `/${prefix}` : ''}`, prefix };
}

function trimPath(path: string): string {
  return path.replace(/^\/+|\/+$/g, '').replace(/\.git$/, '');
}

/** The remote without the token an http remote may carry. */
function redacted(remoteUrl: string): string {
  return remoteUrl.replace(/^(https?:\/\/)[^@/]*@/, '$1');
}
