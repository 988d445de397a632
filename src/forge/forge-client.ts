import type { BranchRules, ForgeCheck, ForgeComment, ForgeKind, ForgeReview, MergeMethod, PullRequestView } from '../shared/forge';

/** Where a repository lives on a forge: the API's base address and the repository's path there. */
export interface ForgeRepository {
  readonly kind: ForgeKind;
  /** The forge's web address, e.g. `https://gitea.example.com` (no trailing slash). */
  readonly webUrl: string;
  /** `owner/name` (GitLab: the project's full path, groups included). */
  readonly path: string;
}

export interface OpenPullRequest {
  readonly head: string;
  readonly base: string;
  readonly title: string;
  readonly body: string;
  /** Created on the repository when missing. */
  readonly labels: readonly string[];
}

/**
 * One forge's REST API, seen through what Warden needs of it. Every method throws a ForgeError on
 * failure; none retries (the activity calling it does, where a retry can help).
 */
export interface ForgeClient {
  readonly repository: ForgeRepository;
  /** The token's user, and its scopes where the forge tells them (undefined where it cannot). */
  whoami(): Promise<{ readonly login: string; readonly scopes?: readonly string[] }>;
  /** The open pull request from `head` into `base`, if there is one. */
  findOpenPullRequest(head: string, base: string): Promise<PullRequestView | undefined>;
  openPullRequest(request: OpenPullRequest): Promise<PullRequestView>;
  pullRequest(number: number): Promise<PullRequestView>;
  /** Replaces the pull request's description. */
  updateBody(number: number, body: string): Promise<void>;
  reviews(number: number): Promise<readonly ForgeReview[]>;
  comments(number: number): Promise<readonly ForgeComment[]>;
  comment(number: number, body: string): Promise<void>;
  close(number: number): Promise<void>;
  /** Every status check on the commit, the latest per context. */
  checks(sha: string): Promise<readonly ForgeCheck[]>;
  branchRules(branch: string): Promise<BranchRules>;
  /** Merges with the method, only while the head is still `headSha`; returns the merge commit. */
  merge(number: number, options: { readonly method: MergeMethod; readonly headSha: string; readonly title: string; readonly message: string }): Promise<{ readonly mergeCommit: string }>;
}

/**
 * Why a forge call failed, in the words the workflow routes on:
 * - unreachable: no answer (connection refused, DNS, timeout); a retry may help
 * - unauthorized: the token is missing, wrong or expired (401)
 * - forbidden: the token lacks a scope or the branch is protected against it (403)
 * - not-found: no such repository, pull request or branch (404)
 * - conflict: the head moved, or the change does not merge (409)
 * - not-mergeable: the forge refuses the merge now (405, 422), e.g. checks or reviews missing
 * - invalid: the forge refused the request's content (400, 422 other than a merge)
 * - server: the forge failed (5xx); a retry may help
 */
export type ForgeErrorKind = 'unreachable' | 'unauthorized' | 'forbidden' | 'not-found' | 'conflict' | 'not-mergeable' | 'invalid' | 'server';

export class ForgeError extends Error {
  constructor(
    readonly kind: ForgeErrorKind,
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ForgeError';
  }

  /** A retry may help. */
  get transient(): boolean {
    return this.kind === 'unreachable' || this.kind === 'server';
  }
}
