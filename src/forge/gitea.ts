import type { BranchRules, CheckState, ForgeCheck, ForgeComment, ForgeReview, ForgeReviewState, MergeMethod, PullRequestView } from '../shared/forge';
import { ForgeError, type ForgeClient, type ForgeErrorKind, type ForgeRepository, type OpenPullRequest } from './forge-client';

/** The parts of Gitea's answers the adapter reads (its REST API under `/api/v1`). */
interface GiteaUser {
  readonly login: string;
}
interface GiteaPullRequest {
  readonly number: number;
  readonly html_url: string;
  readonly state: 'open' | 'closed';
  readonly merged: boolean;
  readonly mergeable: boolean;
  readonly merge_commit_sha?: string | null;
  readonly merged_by?: GiteaUser | null;
  readonly head: { readonly ref: string; readonly sha: string; readonly repo_id?: number };
  readonly base: { readonly ref: string; readonly repo_id?: number };
}
interface GiteaReview {
  readonly id: number;
  readonly user?: GiteaUser | null;
  readonly state: string;
  readonly body: string;
  readonly commit_id?: string;
  readonly dismissed?: boolean;
  readonly submitted_at?: string;
  readonly html_url?: string;
}
interface GiteaComment {
  readonly id: number;
  readonly user?: GiteaUser | null;
  readonly body: string;
  readonly created_at?: string;
  readonly html_url?: string;
}
interface GiteaStatus {
  readonly context: string;
  /** A status object carries its state here, not under `state` as GitHub's do. */
  readonly status: string;
  readonly description?: string;
  readonly target_url?: string;
}
interface GiteaBranch {
  readonly protected: boolean;
  readonly enable_status_check: boolean;
  readonly status_check_contexts?: readonly string[] | null;
  readonly required_approvals: number;
}
interface GiteaLabel {
  readonly id: number;
  readonly name: string;
}

/** Gitea's merge styles for Warden's methods; `rebase` is rebase-then-fast-forward on both forges. */
const MERGE_STYLE: Record<MergeMethod, string> = { merge: 'merge', squash: 'squash', rebase: 'rebase' };

/** Gitea's review states; REQUEST_REVIEW is a request for a review, not a review, and is left out. */
const REVIEW_STATE: Readonly<Record<string, ForgeReviewState>> = {
  APPROVED: 'approved',
  REQUEST_CHANGES: 'changes-requested',
  COMMENT: 'commented',
  PENDING: 'pending',
};

/**
 * Gitea's six commit states in Warden's four, as Gitea itself combines them for a merge:
 * `warning` blocks like a failure, `skipped` passes like a success.
 */
const CHECK_STATE: Readonly<Record<string, CheckState>> = {
  success: 'success',
  skipped: 'success',
  pending: 'pending',
  failure: 'failure',
  warning: 'failure',
  error: 'error',
};

/** The colour a label Warden creates gets (Gitea requires one). */
const NEW_LABEL_COLOR = '#6f42c1';
/** Gitea's largest page size by default (`[api] MAX_RESPONSE_ITEMS`). */
const PAGE_SIZE = 50;
const DEFAULT_TIMEOUT_MS = 30_000;
/** How often a merge Gitea asks to try again later is tried, and how long apart. */
const MERGE_TRIES = 5;
const MERGE_RETRY_MS = 1_000;

export interface GiteaClientOptions {
  /** How long one request may take before it counts as unreachable. */
  readonly timeoutMs?: number;
}

/** Warden's ForgeClient on a Gitea server, through its REST API with an access token. */
export class GiteaClient implements ForgeClient {
  private readonly api: string;
  private readonly repoPath: string;
  private readonly timeoutMs: number;

  constructor(
    readonly repository: ForgeRepository,
    private readonly token: string,
    options: GiteaClientOptions = {},
  ) {
    if (repository.kind !== 'gitea') throw new ForgeError('invalid', `the Gitea adapter was given a ${repository.kind} repository`);
    this.api = `${repository.webUrl.replace(/\/+$/, '')}/api/v1`;
    const [owner, name, ...rest] = repository.path.split('/');
    if (!owner || !name || rest.length > 0) throw new ForgeError('invalid', `a Gitea repository path is owner/name, not ${repository.path}`);
    this.repoPath = `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  async whoami(): Promise<{ readonly login: string; readonly scopes?: readonly string[] }> {
    // Gitea does not tell a token's scopes: a missing one shows as 403 on the call that needs it.
    const user = await this.call<GiteaUser>('GET', '/user');
    return { login: user.login };
  }

  async findOpenPullRequest(head: string, base: string): Promise<PullRequestView | undefined> {
    // Gitea's lookup by base and head answers with any one pull request on the pair, open or not.
    const byPair = await this.call<GiteaPullRequest>('GET', `${this.repoPath}/pulls/${encodeURIComponent(base)}/${encodeURIComponent(head)}`).catch((error: unknown) => {
      if (error instanceof ForgeError && error.kind === 'not-found') return undefined;
      throw error;
    });
    if (!byPair) return undefined;
    if (byPair.state === 'open') return view(byPair);
    // A closed one was found first: look through the open ones for a newer pull request on the pair.
    for (let page = 1; ; page++) {
      const open = await this.call<GiteaPullRequest[]>('GET', `${this.repoPath}/pulls?state=open&limit=${PAGE_SIZE}&page=${page}`);
      const hit = open.find((pr) => pr.head.ref === head && pr.base.ref === base && pr.head.repo_id === pr.base.repo_id);
      if (hit) return view(hit);
      if (open.length < PAGE_SIZE) return undefined;
    }
  }

  async openPullRequest(request: OpenPullRequest): Promise<PullRequestView> {
    const labels = request.labels.length > 0 ? await this.labelIds(request.labels) : [];
    const created = await this.call<GiteaPullRequest>('POST', `${this.repoPath}/pulls`, {
      head: request.head,
      base: request.base,
      title: request.title,
      body: request.body,
      labels,
    });
    return view(created);
  }

  async pullRequest(number: number): Promise<PullRequestView> {
    return view(await this.call<GiteaPullRequest>('GET', `${this.repoPath}/pulls/${number}`));
  }

  async updateBody(number: number, body: string): Promise<void> {
    await this.call('PATCH', `${this.repoPath}/pulls/${number}`, { body });
  }

  async reviews(number: number): Promise<readonly ForgeReview[]> {
    const all = await this.pages<GiteaReview>(`${this.repoPath}/pulls/${number}/reviews`);
    return all.flatMap((review): ForgeReview[] => {
      const verdict = REVIEW_STATE[review.state];
      if (!verdict) return [];
      return [
        {
          id: String(review.id),
          login: review.user?.login ?? '',
          state: review.dismissed ? 'dismissed' : verdict,
          body: review.body ?? '',
          ...(review.commit_id ? { commitId: review.commit_id } : {}),
          ...(review.submitted_at && verdict !== 'pending' ? { submittedAt: review.submitted_at } : {}),
          ...(review.html_url ? { url: review.html_url } : {}),
        },
      ];
    });
  }

  async comments(number: number): Promise<readonly ForgeComment[]> {
    // A pull request's conversation lives on its issue, as on GitHub.
    const all = await this.pages<GiteaComment>(`${this.repoPath}/issues/${number}/comments`);
    return all.map((comment) => ({
      id: String(comment.id),
      login: comment.user?.login ?? '',
      body: comment.body ?? '',
      ...(comment.created_at ? { createdAt: comment.created_at } : {}),
      ...(comment.html_url ? { url: comment.html_url } : {}),
    }));
  }

  async comment(number: number, body: string): Promise<void> {
    await this.call('POST', `${this.repoPath}/issues/${number}/comments`, { body });
  }

  async close(number: number): Promise<void> {
    await this.call('PATCH', `${this.repoPath}/pulls/${number}`, { state: 'closed' });
  }

  async checks(sha: string): Promise<readonly ForgeCheck[]> {
    // The combined status holds the latest status per context.
    const statuses: GiteaStatus[] = [];
    for (let page = 1; ; page++) {
      const combined = await this.call<{ statuses?: GiteaStatus[] | null }>('GET', `${this.repoPath}/commits/${encodeURIComponent(sha)}/status?limit=${PAGE_SIZE}&page=${page}`);
      const batch = combined.statuses ?? [];
      statuses.push(...batch);
      if (batch.length < PAGE_SIZE) break;
    }
    return statuses.map((status) => ({
      context: status.context,
      state: CHECK_STATE[status.status] ?? 'error',
      ...(status.description ? { description: status.description } : {}),
      ...(status.target_url ? { url: status.target_url } : {}),
    }));
  }

  async branchRules(branch: string): Promise<BranchRules> {
    // The branch itself carries its effective protection, readable with read access; the
    // branch_protections endpoints need a repository admin's token.
    const found = await this.call<GiteaBranch>('GET', `${this.repoPath}/branches/${encodeURIComponent(branch)}`);
    return {
      protected: found.protected,
      requiredChecks: found.protected && found.enable_status_check ? [...(found.status_check_contexts ?? [])] : [],
      requiredApprovals: found.protected ? found.required_approvals : 0,
    };
  }

  async merge(number: number, options: { readonly method: MergeMethod; readonly headSha: string; readonly title: string; readonly message: string }): Promise<{ readonly mergeCommit: string }> {
    const body = { Do: MERGE_STYLE[options.method], head_commit_id: options.headSha, merge_title_field: options.title, merge_message_field: options.message };
    // Gitea checks a pull request again after its base moves, and refuses a merge meanwhile with
    // 405 "Please try again later" (the answer for any state but mergeable): asked again a few
    // times, a pull request that was being checked merges; one in conflict is still refused.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.call('POST', `${this.repoPath}/pulls/${number}/merge`, body, { merging: true });
        break;
      } catch (error) {
        if (!(error instanceof ForgeError && error.status === 405 && /try again later/i.test(error.message)) || attempt >= MERGE_TRIES) throw error;
        await new Promise((resolve) => setTimeout(resolve, MERGE_RETRY_MS));
      }
    }
    // Gitea answers a merge with an empty 200: the merge commit is on the pull request.
    const merged = await this.call<GiteaPullRequest>('GET', `${this.repoPath}/pulls/${number}`);
    if (!merged.merged || !merged.merge_commit_sha) throw new ForgeError('server', `Gitea accepted the merge of #${number} but the pull request does not show it merged`);
    return { mergeCommit: merged.merge_commit_sha };
  }

  /** The labels' ids, creating the ones the repository does not have yet. */
  private async labelIds(names: readonly string[]): Promise<number[]> {
    const existing = await this.pages<GiteaLabel>(`${this.repoPath}/labels`);
    const ids: number[] = [];
    for (const name of names) {
      const found = existing.find((label) => label.name === name);
      if (found) ids.push(found.id);
      else ids.push((await this.call<GiteaLabel>('POST', `${this.repoPath}/labels`, { name, color: NEW_LABEL_COLOR })).id);
    }
    return ids;
  }

  private async pages<T>(path: string): Promise<T[]> {
    const all: T[] = [];
    const joiner = path.includes('?') ? '&' : '?';
    for (let page = 1; ; page++) {
      const batch = await this.call<T[] | null>('GET', `${path}${joiner}limit=${PAGE_SIZE}&page=${page}`);
      all.push(...(batch ?? []));
      if (!batch || batch.length < PAGE_SIZE) return all;
    }
  }

  private async call<T = unknown>(method: string, path: string, body?: unknown, context: { merging?: boolean } = {}): Promise<T> {
    const url = `${this.api}${path}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: { authorization: `token ${this.token}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw new ForgeError('unreachable', `Gitea at ${this.repository.webUrl} did not answer ${method} ${path}: ${reason(error)}`);
    }
    const text = await response.text().catch(() => '');
    if (!response.ok) {
      const kind = errorKind(response.status, context.merging === true);
      throw new ForgeError(kind, `Gitea refused ${method} ${path} (${response.status}): ${giteaMessage(text)}`, response.status);
    }
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ForgeError('server', `Gitea answered ${method} ${path} with something that is not JSON: ${text.slice(0, 200)}`, response.status);
    }
  }
}

/** An HTTP failure in the vocabulary of forge-client.ts. */
export function errorKind(status: number, merging: boolean): ForgeErrorKind {
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not-found';
  if (status === 409) return 'conflict';
  if (status === 405) return 'not-mergeable';
  if (status === 422) return merging ? 'not-mergeable' : 'invalid';
  // Rate limiting passes with time, like a server failure.
  if (status === 429 || status >= 500) return 'server';
  return 'invalid';
}

function view(pr: GiteaPullRequest): PullRequestView {
  return {
    number: pr.number,
    url: pr.html_url,
    state: pr.merged ? 'merged' : pr.state,
    headBranch: pr.head.ref,
    baseBranch: pr.base.ref,
    headSha: pr.head.sha,
    ...(pr.merged && pr.merge_commit_sha ? { mergeCommit: pr.merge_commit_sha } : {}),
    // Gitea's `false` also means "still checking" (and "work in progress"): only `true` is an answer.
    ...(pr.state === 'open' && pr.mergeable ? { mergeable: true } : {}),
    ...(pr.merged && pr.merged_by ? { closedBy: pr.merged_by.login } : {}),
  };
}

/** Gitea's error text (`{"message": …}`), else the body's start. */
function giteaMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === 'string' && parsed.message) return parsed.message;
  } catch {
    // not JSON
  }
  return text.trim().slice(0, 300) || 'no message';
}

function reason(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as Error & { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}
