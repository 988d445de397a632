import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { BranchRules, CheckState, ForgeCheck, ForgeComment, ForgeReview, MergeMethod, PullRequestView } from '../shared/forge';
import { ForgeError, type ForgeClient, type ForgeRepository, type OpenPullRequest } from './forge-client';
import { JsonApi } from './json-api';
import { worstPerContext } from './check-states';

/**
 * GitLab's REST API v4 (gitlab.com and self-managed) as a ForgeClient: a pull request is a merge
 * request, its number the MR's `iid`. Only the fields Warden reads are parsed.
 */

const PER_PAGE = 100;
/** The check that stands for the commit's latest pipeline as a whole (what "pipelines must succeed" needs). */
export const GITLAB_PIPELINE_CHECK = 'pipeline';
/** How often, and how many times, a merge request is read back while GitLab rebases it. */
const REBASE_POLL_MS = 1_000;
const REBASE_POLLS = 120;

const userRef = z.object({ id: z.number().optional(), username: z.string() });

const mergeRequest = z.object({
  iid: z.number().int(),
  web_url: z.string(),
  state: z.enum(['opened', 'closed', 'locked', 'merged']),
  source_branch: z.string(),
  target_branch: z.string(),
  sha: z.string().nullish(),
  merge_commit_sha: z.string().nullish(),
  squash_commit_sha: z.string().nullish(),
  detailed_merge_status: z.string().nullish(),
  has_conflicts: z.boolean().optional(),
  merge_user: userRef.nullish(),
  merged_by: userRef.nullish(),
  closed_by: userRef.nullish(),
  rebase_in_progress: z.boolean().optional(),
  merge_error: z.string().nullish(),
  diverged_commits_count: z.number().optional(),
});
type MergeRequest = z.infer<typeof mergeRequest>;

const approvals = z.object({ approved_by: z.array(z.object({ user: userRef })).default([]) });
const reviewer = z.object({ user: userRef, state: z.string().optional() });
const note = z.object({ id: z.number(), body: z.string().nullish(), author: userRef.nullish(), created_at: z.string().optional(), system: z.boolean().optional() });
const commitStatus = z.object({ id: z.number(), name: z.string(), status: z.string(), description: z.string().nullish(), target_url: z.string().nullish() });
const commit = z.object({ last_pipeline: z.object({ status: z.string(), web_url: z.string().nullish() }).nullish() });
const branch = z.object({ protected: z.boolean() });
const project = z.object({ only_allow_merge_if_pipeline_succeeds: z.boolean().optional(), approvals_before_merge: z.number().int().optional() });
const approvalRule = z.object({
  approvals_required: z.number().int(),
  applies_to_all_protected_branches: z.boolean().optional(),
  protected_branches: z.array(z.object({ name: z.string() })).optional(),
});

/** GitLab states a pull request's mergeability is still being worked out in. */
const MERGEABILITY_UNKNOWN = new Set(['unchecked', 'checking', 'preparing', 'approvals_syncing']);

export class GitLabClient implements ForgeClient {
  private readonly api: JsonApi;
  /** The project's id in API paths: its full path, URL-encoded (`group%2Fsub%2Fproject`). */
  private readonly projectId: string;

  constructor(
    readonly repository: ForgeRepository,
    token: string,
    options: { readonly fetch?: typeof fetch } = {},
  ) {
    if (!/^[^/]+(?:\/[^/]+)+$/.test(repository.path)) throw new ForgeError('invalid', `a GitLab project path is group/name (subgroups allowed), not "${repository.path}"`);
    this.projectId = encodeURIComponent(repository.path);
    // Bearer takes personal, project, group and OAuth tokens alike.
    this.api = new JsonApi('GitLab', `${repository.webUrl.replace(/\/+$/, '')}/api/v4`, { Authorization: `Bearer ${token}`, Accept: 'application/json' }, options.fetch);
  }

  async whoami(): Promise<{ login: string; scopes?: string[] }> {
    const me = await this.api.call('GET', '/user', userRef);
    try {
      const token = await this.api.call('GET', '/personal_access_tokens/self', z.object({ scopes: z.array(z.string()) }));
      return { login: me.body.username, scopes: token.body.scopes };
    } catch (error) {
      // An OAuth token is no access token: GitLab will not describe it, and its scopes stay unknown.
      if (error instanceof ForgeError && (error.kind === 'unauthorized' || error.kind === 'forbidden' || error.kind === 'not-found')) return { login: me.body.username };
      throw error;
    }
  }

  async findOpenPullRequest(head: string, base: string): Promise<PullRequestView | undefined> {
    const reply = await this.api.call('GET', this.path('/merge_requests'), z.array(mergeRequest), { query: { state: 'opened', source_branch: head, target_branch: base } });
    const found = reply.body.find((candidate) => candidate.source_branch === head && candidate.target_branch === base);
    return found === undefined ? undefined : view(found);
  }

  async openPullRequest(request: OpenPullRequest): Promise<PullRequestView> {
    // GitLab takes labels as one comma-separated list, and creates the ones the project lacks.
    const withComma = request.labels.find((label) => label.includes(','));
    if (withComma !== undefined) throw new ForgeError('invalid', `GitLab cannot take a label with a comma in it ("${withComma}")`);
    const created = await this.api.call('POST', this.path('/merge_requests'), mergeRequest, {
      body: { source_branch: request.head, target_branch: request.base, title: request.title, description: request.body, ...(request.labels.length > 0 ? { labels: request.labels.join(',') } : {}) },
    });
    return view(created.body);
  }

  async pullRequest(number: number): Promise<PullRequestView> {
    return view(await this.mergeRequest(number));
  }

  async updateBody(number: number, body: string): Promise<void> {
    await this.api.call('PUT', this.mergeRequestPath(number), z.unknown(), { body: { description: body } });
  }

  /**
   * Approvals, and reviewers who requested changes. GitLab's approvals carry no commit and no
   * body; "request changes" is a reviewer's state (`requested_changes`), read from the reviewers
   * list where the GitLab has one.
   */
  async reviews(number: number): Promise<ForgeReview[]> {
    const approved = await this.api.call('GET', this.mergeRequestPath(number, '/approvals'), approvals);
    const reviews: ForgeReview[] = approved.body.approved_by.map(({ user }) => ({ id: `approval-${user.id ?? user.username}`, login: user.username, state: 'approved', body: '' }));
    let reviewers: Array<z.infer<typeof reviewer>> = [];
    try {
      reviewers = (await this.api.call('GET', this.mergeRequestPath(number, '/reviewers'), z.array(reviewer))).body;
    } catch (error) {
      // A GitLab older than the reviewers endpoint: approvals are all there is.
      if (!(error instanceof ForgeError && error.kind === 'not-found')) throw error;
    }
    for (const { user, state } of reviewers) {
      if (state === 'requested_changes') reviews.push({ id: `changes-${user.id ?? user.username}`, login: user.username, state: 'changes-requested', body: '' });
    }
    return reviews;
  }

  /** The merge request's notes, oldest first, without GitLab's own system notes. */
  async comments(number: number): Promise<ForgeComment[]> {
    const notes = await this.api.list(this.mergeRequestPath(number, '/notes'), note, { query: { sort: 'asc', order_by: 'created_at', per_page: PER_PAGE } });
    const page = `${this.repository.webUrl.replace(/\/+$/, '')}/${this.repository.path}/-/merge_requests/${number}`;
    return notes
      .filter((item) => item.system !== true)
      .map((item) => ({
        id: String(item.id),
        login: item.author?.username ?? '',
        body: item.body ?? '',
        ...(item.created_at ? { createdAt: item.created_at } : {}),
        url: `${page}#note_${item.id}`,
      }));
  }

  async comment(number: number, body: string): Promise<void> {
    await this.api.call('POST', this.mergeRequestPath(number, '/notes'), z.unknown(), { body: { body } });
  }

  async close(number: number): Promise<void> {
    await this.api.call('PUT', this.mergeRequestPath(number), z.unknown(), { body: { state_event: 'close' } });
  }

  /** The commit's statuses (CI jobs and external statuses), the latest per name, and its latest pipeline as `pipeline`. */
  async checks(sha: string): Promise<ForgeCheck[]> {
    const ref = encodeURIComponent(sha);
    const statuses = await this.api.list(this.path(`/repository/commits/${ref}/statuses`), commitStatus, { query: { per_page: PER_PAGE } });
    const latest = new Map<string, z.infer<typeof commitStatus>>();
    for (const status of statuses) if ((latest.get(status.name)?.id ?? -1) < status.id) latest.set(status.name, status);
    const checks: ForgeCheck[] = [...latest.values()].map((status) => ({
      context: status.name,
      state: gitlabCheckState(status.status),
      ...(status.description ? { description: status.description } : {}),
      ...(status.target_url ? { url: status.target_url } : {}),
    }));
    const pipeline = (await this.api.call('GET', this.path(`/repository/commits/${ref}`), commit)).body.last_pipeline;
    if (pipeline) checks.push({ context: GITLAB_PIPELINE_CHECK, state: gitlabCheckState(pipeline.status), ...(pipeline.web_url ? { url: pipeline.web_url } : {}) });
    return worstPerContext(checks);
  }

  /**
   * Whether the branch is protected (wildcard protections included), `pipeline` as a required
   * check where the project lets merge requests merge only once their pipeline succeeds, and the
   * most approvals any approval rule for the branch requires (rules exist in paid editions only:
   * where GitLab will not show them, none are counted).
   */
  async branchRules(name: string): Promise<BranchRules> {
    const { body: target } = await this.api.call('GET', this.path(`/repository/branches/${encodeURIComponent(name)}`), branch);
    const { body: settings } = await this.api.call('GET', this.path(''), project);
    let rules: Array<z.infer<typeof approvalRule>> = [];
    try {
      rules = (await this.api.call('GET', this.path('/approval_rules'), z.array(approvalRule))).body;
    } catch (error) {
      if (!(error instanceof ForgeError && (error.kind === 'forbidden' || error.kind === 'not-found'))) throw error;
    }
    const applying = rules.filter((rule) => {
      const named = rule.protected_branches ?? [];
      if (named.length === 0 && rule.applies_to_all_protected_branches !== true) return true;
      if (rule.applies_to_all_protected_branches === true && target.protected) return true;
      return named.some((protectedBranch) => branchPatternMatches(protectedBranch.name, name));
    });
    const requiredApprovals = Math.max(0, settings.approvals_before_merge ?? 0, ...applying.map((rule) => rule.approvals_required));
    return { protected: target.protected, requiredChecks: settings.only_allow_merge_if_pipeline_succeeds === true ? [GITLAB_PIPELINE_CHECK] : [], requiredApprovals };
  }

  /**
   * The project's merge method (merge commit, semi-linear, fast-forward) is a project setting
   * GitLab applies to every merge; the call chooses only whether to squash. `rebase` rebases the
   * source branch onto the target first (when it is behind), then merges the rebased head.
   */
  async merge(number: number, options: { readonly method: MergeMethod; readonly headSha: string; readonly title: string; readonly message: string }): Promise<{ mergeCommit: string }> {
    const text = options.message === '' ? options.title : `${options.title}\n\n${options.message}`;
    let sha = options.headSha;
    if (options.method === 'rebase') sha = await this.rebase(number, options.headSha);
    const merged = await this.api.call('PUT', this.mergeRequestPath(number, '/merge'), mergeRequest, {
      body: { sha, squash: options.method === 'squash', merge_commit_message: text, ...(options.method === 'squash' ? { squash_commit_message: text } : {}) },
      merge: true,
    });
    const mergeCommit = merged.body.merge_commit_sha ?? merged.body.squash_commit_sha ?? merged.body.sha;
    if (!mergeCommit) throw new ForgeError('server', `GitLab merged !${number} but named no commit`);
    return { mergeCommit };
  }

  /** Rebases the source branch while its head is `headSha`; returns the head after it. */
  private async rebase(number: number, headSha: string): Promise<string> {
    const before = await this.mergeRequest(number, { include_diverged_commits_count: true });
    if (before.sha !== headSha) throw new ForgeError('conflict', `GitLab !${number}: the head moved (${before.sha ?? 'none'}, not ${headSha})`, 409);
    if ((before.diverged_commits_count ?? 1) === 0) return headSha;
    await this.api.call('PUT', this.mergeRequestPath(number, '/rebase'), z.unknown());
    for (let poll = 0; poll < REBASE_POLLS; poll += 1) {
      if (poll > 0) await sleep(REBASE_POLL_MS);
      const now = await this.mergeRequest(number, { include_rebase_in_progress: true });
      if (now.rebase_in_progress === true) continue;
      if (now.merge_error) throw new ForgeError('conflict', `GitLab !${number}: the rebase failed: ${now.merge_error}`, 409);
      if (!now.sha) throw new ForgeError('server', `GitLab !${number}: no head after the rebase`);
      return now.sha;
    }
    throw new ForgeError('server', `GitLab !${number}: the rebase was still running after ${(REBASE_POLLS * REBASE_POLL_MS) / 1000} s`);
  }

  private async mergeRequest(number: number, query?: Readonly<Record<string, boolean>>): Promise<MergeRequest> {
    return (await this.api.call('GET', this.mergeRequestPath(number), mergeRequest, query === undefined ? {} : { query })).body;
  }

  private path(rest: string): string {
    return `/projects/${this.projectId}${rest}`;
  }

  private mergeRequestPath(number: number, rest = ''): string {
    return this.path(`/merge_requests/${number}${rest}`);
  }
}

function view(item: MergeRequest): PullRequestView {
  const merged = item.state === 'merged';
  // A fast-forward merge makes no merge commit: the head itself lands on the target.
  const mergeCommit = merged ? (item.merge_commit_sha ?? item.squash_commit_sha ?? item.sha ?? undefined) : undefined;
  const closer = merged ? (item.merge_user ?? item.merged_by) : item.state === 'closed' ? item.closed_by : undefined;
  return {
    number: item.iid,
    url: item.web_url,
    // `locked` is GitLab's brief state while a merge is under way.
    state: merged ? 'merged' : item.state === 'closed' ? 'closed' : 'open',
    headBranch: item.source_branch,
    baseBranch: item.target_branch,
    headSha: item.sha ?? '',
    ...(mergeCommit ? { mergeCommit } : {}),
    ...mergeability(item),
    ...(closer ? { closedBy: closer.username } : {}),
  };
}

/** Whether it merges without conflicts, as GitHub's and Gitea's `mergeable` say; GitLab's other blockers (approvals, pipeline) are Warden's own checks. */
function mergeability(item: MergeRequest): { mergeable?: boolean } {
  const status = item.detailed_merge_status ?? undefined;
  if (status !== undefined && MERGEABILITY_UNKNOWN.has(status)) return {};
  if (status === 'conflict' || item.has_conflicts === true) return { mergeable: false };
  if (status !== undefined || item.has_conflicts === false) return { mergeable: true };
  return {};
}

/** A GitLab job, status or pipeline state as a check state: cancelled and skipped are errors (nothing passed). */
export function gitlabCheckState(status: string): CheckState {
  switch (status) {
    case 'success':
      return 'success';
    case 'failed':
      return 'failure';
    case 'canceled':
    case 'canceling':
    case 'skipped':
      return 'error';
    default:
      // created, waiting_for_resource, preparing, pending, running, manual, scheduled
      return 'pending';
  }
}

/** A protected-branch name against a branch: GitLab's `*` wildcard matches any run of characters. */
function branchPatternMatches(pattern: string, name: string): boolean {
  const expression = pattern
    .split('*')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${expression}$`).test(name);
}
