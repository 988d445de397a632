import { ApplicationFailure } from '@temporalio/activity';
import { FailureType } from '../shared/errors';
import type { BranchRules, ForgeCheck, ForgeComment, ForgeReview, MergeMethod, PullRequestState } from '../shared/forge';
import { branchForIntent } from '../shared/ids';
import type { Intent } from '../shared/intent';
import type { ForgeSettings } from '../shared/merge-settings';
import { ForgeError, type ForgeClient, type ForgeRepository } from '../forge/forge-client';
import { git, gitRaw, refExists } from './git';
import { treeWithoutLineage } from './worktree';

/** What the worker holds to reach a forge: never part of an intent, never in an agent's environment. */
export interface ForgeActivityDeps {
  /** The worker's environment, where `merge.forge.tokenEnv` names the token. */
  readonly env: NodeJS.ProcessEnv;
  /** The adapter for a repository on a forge (src/forge). */
  readonly forgeClient: (repository: ForgeRepository, token: string) => ForgeClient;
  /** Where the remote's URL says the repository is, on the forge the settings name. */
  readonly repositoryOf: (remoteUrl: string, settings: Pick<ForgeSettings, 'kind' | 'url'>) => ForgeRepository;
}

/** Where the change last went to the forge: the commit the pull request's branch holds. */
export function publishedRefFor(intentId: string): string {
  return `refs/warden/published/${intentId}`;
}

export interface PublishedPullRequest {
  readonly number: number;
  readonly url: string;
  /** The commit the pull request's head now is. */
  readonly headSha: string;
  /** The pull request was opened by this call (else it was found open and updated). */
  readonly opened: boolean;
  /** A commit went to the forge in this call. */
  readonly pushed: boolean;
}

export interface PullRequestNews {
  readonly state: PullRequestState;
  readonly headSha: string;
  readonly mergeable?: boolean;
  readonly mergeCommit?: string;
  readonly closedBy?: string;
  /** Submitted reviews not in `seen`. */
  readonly reviews: readonly ForgeReview[];
  /** Comments not in `seen` that start with the changes command. */
  readonly commands: readonly ForgeComment[];
}

export interface ChecksReport {
  readonly rules: BranchRules;
  /** The checks that must pass: the protection's required ones, or every one reported where it lists none. */
  readonly checks: readonly ForgeCheck[];
  /** Required contexts no check has reported on yet. */
  readonly missing: readonly string[];
  readonly verdict: 'passed' | 'waiting' | 'failed';
}

/** Longest review or comment text carried into the workflow's history. */
const MAX_TEXT = 2_000;

/**
 * The merge gate as a pull request: push the change (without its lineage) to the forge, open or
 * update the pull request, read its reviews and checks, merge through the forge, close it. Each
 * is idempotent, so a retry after a lost answer does no harm. The token stays in the worker.
 */
export function createForgeActivities(deps: ForgeActivityDeps) {
  async function access(intent: Intent): Promise<{ client: ForgeClient; settings: ForgeSettings; token: string; remoteUrl: string }> {
    const settings = intent.merge.forge;
    if (!settings) throw forgeFailure('invalid', `intent ${intent.id} merges through a pull request but names no forge (merge.forge)`);
    const token = deps.env[settings.tokenEnv];
    if (!token) throw forgeFailure('unauthorized', `the worker has no ${settings.tokenEnv}: set it to a token of the forge's Warden user (repository write, pull requests)`);
    const remote = await gitRaw(intent.repoPath, ['remote', 'get-url', settings.remote]);
    if (remote.code !== 0) throw forgeFailure('not-found', `${intent.repoPath} has no remote ${settings.remote} to push the change to (git remote add ${settings.remote} URL)`);
    const remoteUrl = remote.stdout.trim();
    return { client: deps.forgeClient(deps.repositoryOf(remoteUrl, settings), token), settings, token, remoteUrl };
  }

  return {
    /**
     * Pushes the intent's change to `warden/<id>` on the forge and opens its pull request (or
     * updates the open one's description). The pushed commit has the branch head's tree less the
     * lineage; after a request for changes it is a new commit on top of the last one pushed, so
     * reviewers see what changed.
     */
    async publishPullRequest(input: { readonly intent: Intent; readonly title: string; readonly body: string; readonly labels: readonly string[]; readonly round: number }): Promise<PublishedPullRequest> {
      const { intent } = input;
      return forgeCall(async () => {
        const { client, settings, token } = await access(intent);
        const branch = branchForIntent(intent.id);
        const head = await git(intent.repoPath, ['rev-parse', `refs/heads/${branch}`]);
        const commit = await changeCommit(intent, head, input.round);
        const remoteHead = await remoteBranchHead(intent.repoPath, settings.remote, branch, token, await loginOf(client));
        const pushed = remoteHead !== commit;
        if (pushed) await push(intent.repoPath, settings.remote, commit, branch, token, await loginOf(client));
        await git(intent.repoPath, ['update-ref', publishedRefFor(intent.id), commit]);
        const found = await client.findOpenPullRequest(branch, intent.baseBranch);
        if (found) {
          await client.updateBody(found.number, input.body);
          return { number: found.number, url: found.url, headSha: commit, opened: false, pushed };
        }
        const opened = await client.openPullRequest({ head: branch, base: intent.baseBranch, title: input.title, body: input.body, labels: input.labels });
        return { number: opened.number, url: opened.url, headSha: commit, opened: true, pushed };
      });
    },

    /** What is new on the pull request since `seen` (ids of reviews and comments already handled). */
    async readPullRequest({ intent, number, seen }: { readonly intent: Intent; readonly number: number; readonly seen: readonly string[] }): Promise<PullRequestNews> {
      return forgeCall(async () => {
        const { client, settings } = await access(intent);
        const known = new Set(seen);
        const [view, reviews, comments] = await Promise.all([client.pullRequest(number), client.reviews(number), client.comments(number)]);
        const fresh = reviews.filter((r) => !known.has(`review:${r.id}`) && r.state !== 'pending');
        const commands = comments.filter((c) => !known.has(`comment:${c.id}`) && c.body.trimStart().startsWith(settings.changesCommand));
        return {
          state: view.state,
          headSha: view.headSha,
          ...(view.mergeable !== undefined ? { mergeable: view.mergeable } : {}),
          ...(view.mergeCommit ? { mergeCommit: view.mergeCommit } : {}),
          ...(view.closedBy ? { closedBy: view.closedBy } : {}),
          reviews: fresh.map((r) => ({ ...r, body: r.body.slice(0, MAX_TEXT) })),
          commands: commands.map((c) => ({ ...c, body: c.body.slice(0, MAX_TEXT) })),
        };
      });
    },

    /** The base branch's protection and the state of the checks it requires on `headSha`. */
    async checkPullRequest({ intent, headSha }: { readonly intent: Intent; readonly headSha: string }): Promise<ChecksReport> {
      return forgeCall(async () => {
        const { client } = await access(intent);
        const [rules, checks] = await Promise.all([client.branchRules(intent.baseBranch), client.checks(headSha)]);
        return checksVerdict(rules, checks);
      });
    },

    /** Merges through the forge with the method, only while its head is the approved commit. Idempotent. */
    async mergePullRequest({ intent, number, headSha, method }: { readonly intent: Intent; readonly number: number; readonly headSha: string; readonly method: MergeMethod }): Promise<{ readonly mergeCommit: string }> {
      return forgeCall(async () => {
        const { client, settings, token } = await access(intent);
        const view = await client.pullRequest(number);
        const subject = intent.goal.split('\n')[0]!.trim().slice(0, 72);
        const { mergeCommit } =
          view.state === 'merged' && view.mergeCommit
            ? { mergeCommit: view.mergeCommit }
            : await client.merge(number, { method, headSha, title: `warden(${intent.id}): ${subject}`, message: `${intent.goal}\n\nMerged by Warden after the merge gate and the forge's checks.` });
        // The remote-tracking branch shows the merge; the local base branch is the person's to pull.
        await gitRaw(intent.repoPath, ['-c', 'credential.helper=', ...authConfigArgs(), 'fetch', '-q', settings.remote, `+refs/heads/${intent.baseBranch}:refs/remotes/${settings.remote}/${intent.baseBranch}`], { env: authEnv(token, await loginOf(client)) });
        return { mergeCommit };
      });
    },

    async commentOnPullRequest({ intent, number, body }: { readonly intent: Intent; readonly number: number; readonly body: string }): Promise<void> {
      return forgeCall(async () => {
        const { client } = await access(intent);
        await client.comment(number, body);
      });
    },

    /** Says why on the pull request, then closes it; a pull request already closed or merged is left as it is. */
    async closePullRequest({ intent, number, reason }: { readonly intent: Intent; readonly number: number; readonly reason: string }): Promise<{ readonly closed: boolean }> {
      return forgeCall(async () => {
        const { client } = await access(intent);
        const view = await client.pullRequest(number);
        if (view.state !== 'open') return { closed: false };
        await client.comment(number, reason);
        await client.close(number);
        return { closed: true };
      });
    },
  };

  /**
   * The commit that carries the change to the forge: the branch head's tree less the lineage, on
   * the last commit pushed when that still starts from where the branch left the base, else on
   * that fork point. The same tree on the same parent is the same commit: nothing new to push.
   */
  async function changeCommit(intent: Intent, head: string, round: number): Promise<string> {
    const { repoPath } = intent;
    const forkPoint = await git(repoPath, ['merge-base', `refs/heads/${intent.baseBranch}`, head]);
    const tree = await treeWithoutLineage(repoPath, head, intent.id);
    const published = publishedRefFor(intent.id);
    let parent = forkPoint;
    if (await refExists(repoPath, published)) {
      const last = await git(repoPath, ['rev-parse', published]);
      if ((await gitRaw(repoPath, ['merge-base', '--is-ancestor', forkPoint, last])).code === 0) parent = last;
    }
    if (parent !== forkPoint && (await git(repoPath, ['rev-parse', `${parent}^{tree}`])) === tree) return parent;
    const subject = intent.goal.split('\n')[0]!.trim();
    const message =
      parent === forkPoint
        ? `warden(${intent.id}): ${subject.length > 72 ? `${subject.slice(0, 71)}…` : subject}\n\n${intent.goal}\n`
        : `warden(${intent.id}): changes after review (round ${round})\n`;
    const date = await git(repoPath, ['log', '-1', '--format=%cd', '--date=raw', head]);
    return git(repoPath, ['commit-tree', tree, '-p', parent, '-m', message], { env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } });
  }
}

/** The forge login the token belongs to, asked once per client. */
const logins = new WeakMap<ForgeClient, Promise<string>>();
function loginOf(client: ForgeClient): Promise<string> {
  let login = logins.get(client);
  if (!login) {
    login = client.whoami().then((me) => me.login);
    logins.set(client, login);
  }
  return login;
}

/** No credential helper or prompt: the only credential is the header in the environment. */
function authConfigArgs(): string[] {
  return ['-c', 'core.askPass='];
}

/**
 * The token reaches git through the environment (GIT_CONFIG_*), never its command line, where
 * anyone on the machine could read it: an HTTP basic header of the token's login and the token,
 * which Gitea, GitHub and GitLab all take for pushes over HTTPS.
 */
function authEnv(token: string, login: string): Record<string, string> {
  const basic = Buffer.from(`${login}:${token}`).toString('base64');
  return { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`, GIT_TERMINAL_PROMPT: '0' };
}

async function remoteBranchHead(repoPath: string, remote: string, branch: string, token: string, login: string): Promise<string | undefined> {
  const listed = await gitRaw(repoPath, [...authConfigArgs(), 'ls-remote', remote, `refs/heads/${branch}`], { env: authEnv(token, login) });
  if (listed.code !== 0) throw pushRefusal(remote, listed.stderr);
  return listed.stdout.trim().split(/\s+/)[0] || undefined;
}

async function push(repoPath: string, remote: string, commit: string, branch: string, token: string, login: string): Promise<void> {
  // Forced: the branch is Warden's own, and after the base moved its change starts again from the new fork point.
  const pushed = await gitRaw(repoPath, [...authConfigArgs(), 'push', '-q', remote, `+${commit}:refs/heads/${branch}`], { env: authEnv(token, login) });
  if (pushed.code !== 0) throw pushRefusal(remote, pushed.stderr);
}

/** A failed push or ls-remote, in the forge's error kinds. The message never holds the token (it is only in the environment). */
function pushRefusal(remote: string, stderr: string): ForgeError {
  const text = stderr.trim().slice(-600);
  if (/could not resolve host|connection refused|timed out|unable to access|failed to connect|couldn't connect/i.test(text) && !/\b40[13]\b/.test(text)) {
    return new ForgeError('unreachable', `cannot reach remote ${remote}: ${text}`);
  }
  if (/\b401\b|authentication failed|invalid credentials|could not read username/i.test(text)) return new ForgeError('unauthorized', `remote ${remote} refused the worker's token: ${text}`);
  if (/protected branch|\b403\b|permission|not allowed|denied/i.test(text)) return new ForgeError('forbidden', `remote ${remote} refused the push: ${text}`);
  if (/not found|does not appear to be a git repository|\b404\b/i.test(text)) return new ForgeError('not-found', `remote ${remote} has no such repository: ${text}`);
  return new ForgeError('server', `push to ${remote} failed: ${text}`);
}

/** The checks that must pass and where they stand. */
export function checksVerdict(rules: BranchRules, checks: readonly ForgeCheck[]): ChecksReport {
  const required = new Set(rules.requiredChecks);
  const relevant = required.size > 0 ? checks.filter((c) => required.has(c.context)) : [...checks];
  const missing = [...required].filter((context) => !checks.some((c) => c.context === context));
  const verdict = relevant.some((c) => c.state === 'failure' || c.state === 'error') ? 'failed' : missing.length > 0 || relevant.some((c) => c.state === 'pending') ? 'waiting' : 'passed';
  return { rules, checks: relevant, missing, verdict };
}

/** Runs a forge call; a ForgeError becomes a FORGE_FAILED failure that retries only where a retry may help. */
async function forgeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ForgeError) throw forgeFailure(error.kind, error.message);
    throw error;
  }
}

function forgeFailure(kind: ForgeError['kind'], message: string): ApplicationFailure {
  const transient = new ForgeError(kind, message).transient;
  return ApplicationFailure.create({ type: FailureType.ForgeFailed, message: `forge (${kind}): ${message}`, nonRetryable: !transient, details: [{ kind }] });
}
