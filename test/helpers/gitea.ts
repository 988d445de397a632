/**
 * A real Gitea for a test file: SQLite in a temp work dir, on a free loopback port, with three
 * users, their tokens, and one repository whose base branch is protected (a required status check
 * and a required approval). The binary comes from test/setup/gitea-forge.ts, built once into the
 * Warden home; the first test file to need it waits for that build.
 *
 *   const forge = useGitea();            // beforeAll starts it, afterAll stops it and removes its dir
 *   forge().repository                   // the ForgeRepository the adapter is given
 *   forge().author.token                 // ...and the token it is given
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ForgeRepository } from '../../src/forge/forge-client';
import { findFreePort } from '../../src/shared/ports';
import { ensureGitea } from '../setup/gitea-forge';

const execFileAsync = promisify(execFile);

const APP_INI_TEMPLATE = path.resolve(__dirname, '../fixtures/forge/app.ini');

export interface GiteaUser {
  readonly login: string;
  readonly password: string;
  readonly email: string;
  /** An access token with every scope. */
  readonly token: string;
}

/** What the base branch's protection asks for. */
export const GITEA_BASE_BRANCH = 'main';
export const GITEA_REQUIRED_CHECK = 'ci/test';
export const GITEA_REQUIRED_APPROVALS = 1;

export interface GiteaForge {
  /** The web address, e.g. `http://127.0.0.1:3301` (no trailing slash). */
  readonly webUrl: string;
  /** `<webUrl>/api/v1`. */
  readonly apiUrl: string;
  /** Site admin; owns the repository and opens the pull requests. */
  readonly author: GiteaUser;
  /** A collaborator with write access whose approval counts toward the protection. */
  readonly reviewer: GiteaUser;
  /** A collaborator with read access only: may comment and review, never approves for the merge. */
  readonly bystander: GiteaUser;
  /** The protected repository, as the adapter is given it. */
  readonly repository: ForgeRepository;
  /** `git clone` address of the repository, with `user`'s token in it (default: the author's). */
  cloneUrl(user?: GiteaUser): string;
  /** One REST call; the JSON answer (undefined when empty). Throws on a status of 300 or more. */
  api<T = unknown>(method: string, apiPath: string, options?: { body?: unknown; user?: GiteaUser }): Promise<T>;
  /** A new token for `user` with only `scopes` (e.g. `['read:user']`). */
  createToken(user: GiteaUser, scopes: readonly string[]): Promise<string>;
  /**
   * Commits `files` onto `branch` through the contents API, making the branch from `from` (default
   * the base branch) when it does not exist yet; returns the branch's new head.
   */
  commitFiles(branch: string, files: Readonly<Record<string, string>>, options?: { from?: string; message?: string }): Promise<string>;
  /** Registers a webhook on the repository; returns its id. */
  addWebhook(url: string, secret: string, events?: readonly string[]): Promise<number>;
  /** The server's log so far (for a failing test's message). */
  log(): Promise<string>;
  stop(): Promise<void>;
}

const USERS = {
  author: { login: 'forgeadmin', password: 'Adm1n-pass-123', email: 'forgeadmin@example.com', admin: true },
  reviewer: { login: 'reviewer', password: 'Rev1ewer-pass-123', email: 'reviewer@example.com', admin: false },
  bystander: { login: 'bystander', password: 'Bystand3r-pass-123', email: 'bystander@example.com', admin: false },
} as const;
const REPOSITORY_NAME = 'service';

/** Starts a Gitea with its users, tokens and protected repository. */
export async function startGitea(options: { log?: (message: string) => void } = {}): Promise<GiteaForge> {
  const binary = await ensureGitea({ log: options.log ?? ((message) => process.stderr.write(`[gitea] ${message}\n`)) });
  const workDir = await mkdtemp(path.join(tmpdir(), 'warden-gitea-'));
  let server: ChildProcess | undefined;
  try {
    const port = await findFreePort();
    const config = path.join(workDir, 'custom', 'conf', 'app.ini');
    await mkdir(path.dirname(config), { recursive: true });
    const template = await readFile(APP_INI_TEMPLATE, 'utf8');
    await writeFile(
      config,
      template
        .replaceAll('{{WORK_DIR}}', workDir)
        .replaceAll('{{PORT}}', String(port))
        .replaceAll('{{SECRET_KEY}}', randomBytes(24).toString('hex'))
        .replaceAll('{{INTERNAL_TOKEN}}', randomBytes(32).toString('hex')),
    );
    const env: NodeJS.ProcessEnv = { ...process.env, GITEA_WORK_DIR: workDir, GITEA_CUSTOM: path.join(workDir, 'custom'), HOME: workDir };
    // Gitea refuses to run as root unless told that it is meant.
    if (process.getuid?.() === 0) env.GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = 'true';
    const cli = async (args: readonly string[]): Promise<string> => (await execFileAsync(binary, ['-c', config, ...args], { env, cwd: workDir })).stdout;

    await cli(['migrate']);
    const users = {} as Record<keyof typeof USERS, GiteaUser>;
    for (const [role, user] of Object.entries(USERS) as [keyof typeof USERS, (typeof USERS)[keyof typeof USERS]][]) {
      await cli(['admin', 'user', 'create', ...(user.admin ? ['--admin'] : []), '--username', user.login, '--password', user.password, '--email', user.email, '--must-change-password=false']);
      const out = await cli(['admin', 'user', 'generate-access-token', '--username', user.login, '--token-name', 'tests', '--scopes', 'all', '--raw']);
      // As root, Gitea's warning about it goes to stdout too: the token is the line of 40 hex digits.
      const token = out.split('\n').find((line) => /^[0-9a-f]{40}$/.test(line.trim()))?.trim();
      if (!token) throw new Error(`gitea printed no token for ${user.login}: ${out}`);
      users[role] = { login: user.login, password: user.password, email: user.email, token };
    }

    const logFile = path.join(workDir, 'server.out');
    const out = openSync(logFile, 'a');
    server = spawn('nice', ['-n', '10', binary, '-c', config, 'web'], { env, cwd: workDir, stdio: ['ignore', out, out] });
    closeSync(out);
    const exited = new Promise<never>((_, reject) => {
      server!.once('exit', (code, signal) => reject(new Error(`gitea exited before it answered (code ${code}, signal ${signal})`)));
      server!.once('error', reject);
    });
    exited.catch(() => undefined);

    const webUrl = `http://127.0.0.1:${port}`;
    const apiUrl = `${webUrl}/api/v1`;
    const readLog = async (): Promise<string> => {
      const parts = await Promise.all([readFile(logFile, 'utf8').catch(() => ''), readFile(path.join(workDir, 'log', 'gitea.log'), 'utf8').catch(() => '')]);
      return parts.join('\n');
    };
    await Promise.race([waitUntilAnswering(`${apiUrl}/version`), exited]).catch(async (error: unknown) => {
      throw new Error(`${error instanceof Error ? error.message : String(error)}\n${(await readLog()).slice(-3000)}`);
    });

    const api = async <T>(method: string, apiPath: string, opts: { body?: unknown; user?: GiteaUser } = {}): Promise<T> => {
      const response = await fetch(`${apiUrl}${apiPath}`, {
        method,
        headers: { authorization: `token ${(opts.user ?? users.author).token}`, 'content-type': 'application/json', accept: 'application/json' },
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      });
      const text = await response.text();
      if (response.status >= 300) throw new Error(`gitea ${method} ${apiPath}: ${response.status} ${text}`);
      return (text ? JSON.parse(text) : undefined) as T;
    };

    const owner = users.author.login;
    const repoPath = `/repos/${owner}/${REPOSITORY_NAME}`;
    await api('POST', '/user/repos', { body: { name: REPOSITORY_NAME, auto_init: true, default_branch: GITEA_BASE_BRANCH, readme: 'Default' } });
    await api('PUT', `${repoPath}/collaborators/${users.reviewer.login}`, { body: { permission: 'write' } });
    await api('PUT', `${repoPath}/collaborators/${users.bystander.login}`, { body: { permission: 'read' } });
    await api('POST', `${repoPath}/branch_protections`, {
      body: {
        rule_name: GITEA_BASE_BRANCH,
        enable_status_check: true,
        status_check_contexts: [GITEA_REQUIRED_CHECK],
        required_approvals: GITEA_REQUIRED_APPROVALS,
        // Only the reviewer's approval counts (the author cannot approve their own pull request anyway).
        enable_approvals_whitelist: true,
        approvals_whitelist_username: [users.reviewer.login],
      },
    });

    const running = server;
    const forge: GiteaForge = {
      webUrl,
      apiUrl,
      author: users.author,
      reviewer: users.reviewer,
      bystander: users.bystander,
      repository: { kind: 'gitea', webUrl, path: `${owner}/${REPOSITORY_NAME}` },
      cloneUrl: (user = users.author) => `http://${user.login}:${user.token}@127.0.0.1:${port}/${owner}/${REPOSITORY_NAME}.git`,
      api,
      createToken: async (user, scopes) => {
        const response = await fetch(`${apiUrl}/users/${user.login}/tokens`, {
          method: 'POST',
          headers: { authorization: `Basic ${Buffer.from(`${user.login}:${user.password}`).toString('base64')}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `token-${randomBytes(4).toString('hex')}`, scopes }),
        });
        const created = (await response.json()) as { sha1?: string; message?: string };
        if (!response.ok || !created.sha1) throw new Error(`gitea made no token for ${user.login}: ${response.status} ${created.message ?? ''}`);
        return created.sha1;
      },
      commitFiles: async (branch, files, opts = {}) => {
        const exists = await api('GET', `${repoPath}/branches/${encodeURIComponent(branch)}`).then(
          () => true,
          () => false,
        );
        const changed = await api<{ commit: { sha: string } }>('POST', `${repoPath}/contents`, {
          body: {
            message: opts.message ?? `Change ${Object.keys(files).join(', ')}`,
            ...(exists ? { branch } : { branch: opts.from ?? GITEA_BASE_BRANCH, new_branch: branch }),
            files: await Promise.all(
              Object.entries(files).map(async ([file, content]) => {
                const current = await api<{ sha: string }>('GET', `${repoPath}/contents/${file}?ref=${encodeURIComponent(exists ? branch : (opts.from ?? GITEA_BASE_BRANCH))}`).catch(() => undefined);
                return { operation: current ? 'update' : 'create', path: file, content: Buffer.from(content).toString('base64'), ...(current ? { sha: current.sha } : {}) };
              }),
            ),
          },
        });
        return changed.commit.sha;
      },
      addWebhook: async (url, secret, events = ['pull_request', 'pull_request_review', 'status']) => {
        const hook = await api<{ id: number }>('POST', `${repoPath}/hooks`, { body: { type: 'gitea', active: true, events, config: { url, content_type: 'json', secret } } });
        return hook.id;
      },
      log: readLog,
      stop: async () => {
        await stopProcess(running);
        await rm(workDir, { recursive: true, force: true });
      },
    };
    return forge;
  } catch (error) {
    if (server) await stopProcess(server);
    await rm(workDir, { recursive: true, force: true });
    throw error;
  }
}

/** Polls until the address answers 200; the caller races this with the server's exit. */
async function waitUntilAnswering(url: string): Promise<void> {
  for (;;) {
    const ok = await fetch(url).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** SIGTERM (Gitea shuts down gracefully on it) and wait for the exit. */
async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await exited;
}

/**
 * A Gitea for the test file: started in beforeAll (which may wait for the one-time build, so
 * its hook guard is long), stopped and removed in afterAll.
 */
export function useGitea(): () => GiteaForge {
  let forge: GiteaForge | undefined;
  beforeAll(async () => {
    forge = await startGitea();
  }, 45 * 60_000);
  afterAll(async () => {
    await forge?.stop();
  });
  return () => {
    if (!forge) throw new Error('the Gitea is used before its beforeAll ran');
    return forge;
  };
}
