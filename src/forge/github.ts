import { z } from 'zod';
import type { BranchRules, CheckState, ForgeCheck, ForgeComment, ForgeReview, ForgeReviewState, MergeMethod, PullRequestView } from '../shared/forge';
import { ForgeError, type ForgeClient, type ForgeRepository, type OpenPullRequest } from './forge-client';
import { JsonApi } from './json-api';
import { worstPerContext } from './check-states';

/**
 * GitHub's REST API (github.com and GitHub Enterprise Server) as a ForgeClient. Only the fields
 * Warden reads are parsed; everything else in GitHub's answers is ignored.
 */

const API_VERSION = '2022-11-28';
const PER_PAGE = 100;

const user = z.object({ login: z.string() });

const pull = z.object({
  number: z.number().int(),
  html_url: z.string(),
  state: z.enum(['open', 'closed']),
  // A single pull request says `merged`; the list only `merged_at`.
  merged: z.boolean().optional(),
  merged_at: z.string().nullish(),
  merge_commit_sha: z.string().nullish(),
  mergeable: z.boolean().nullish(),
  merged_by: user.nullish(),
  head: z.object({ ref: z.string(), sha: z.string() }),
  base: z.object({ ref: z.string() }),
});
type Pull = z.infer<typeof pull>;

const review = z.object({
  id: z.number(),
  user: user.nullable(),
  body: z.string().nullish(),
  state: z.string(),
  html_url: z.string().optional(),
  commit_id: z.string().nullish(),
  submitted_at: z.string().nullish(),
});

const issueComment = z.object({
  id: z.number(),
  user: user.nullable(),
  body: z.string().nullish(),
  created_at: z.string().optional(),
  html_url: z.string().optional(),
});

const commitStatus = z.object({
  context: z.string(),
  state: z.enum(['success', 'pending', 'failure', 'error']),
  description: z.string().nullish(),
  target_url: z.string().nullish(),
});

const checkRun = z.object({
  id: z.number(),
  name: z.string(),
  status: z.string(),
  conclusion: z.string().nullish(),
  html_url: z.string().nullish(),
  output: z.object({ title: z.string().nullish() }).partial().nullish(),
});

const protection = z.object({
  required_status_checks: z
    .object({
      contexts: z.array(z.string()).optional(),
      checks: z.array(z.object({ context: z.string() })).optional(),
    })
    .nullish(),
  required_pull_request_reviews: z.object({ required_approving_review_count: z.number().int().optional() }).nullish(),
});

/** One rule of the rulesets that apply to a branch; only two types matter to Warden. */
const rulesetRule = z.object({
  type: z.string(),
  parameters: z
    .object({
      required_status_checks: z.array(z.object({ context: z.string() })).optional(),
      required_approving_review_count: z.number().int().optional(),
    })
    .nullish(),
});

const mergeResult = z.object({ sha: z.string() });

const REVIEW_STATES: Readonly<Record<string, ForgeReviewState>> = {
  APPROVED: 'approved',
  CHANGES_REQUESTED: 'changes-requested',
  COMMENTED: 'commented',
  PENDING: 'pending',
  DISMISSED: 'dismissed',
};

/** GitHub's API address for a web address: github.com's own, or an Enterprise Server's `/api/v3`. */
export function githubApiBase(webUrl: string): string {
  const url = new URL(webUrl);
  if (url.hostname === 'github.com' || url.hostname === 'www.github.com') return 'https://api.github.com';
  return `${webUrl.replace(/\/+$/, '')}/api/v3`;
}

export class GitHubClient implements ForgeClient {
  private readonly api: JsonApi;
  private readonly owner: string;
  private readonly repo: string;

  constructor(
    readonly repository: ForgeRepository,
    token: string,
    options: { readonly fetch?: typeof fetch } = {},
  ) {
    const [owner, repo, ...rest] = repository.path.split('/');
    if (owner === undefined || repo === undefined || owner === '' || repo === '' || rest.length > 0) {
      throw new ForgeError('invalid', `a GitHub repository path is owner/name, not "${repository.path}"`);
    }
    this.owner = owner;
    this.repo = repo;
    this.api = new JsonApi(
      'GitHub',
      githubApiBase(repository.webUrl),
      { Authorization: `Bearer ${token}`, Accept: 'application/vnd.github+json', 'X-GitHub-Api-Version': API_VERSION, 'User-Agent': 'warden' },
      options.fetch,
    );
  }

  async whoami(): Promise<{ login: string; scopes?: string[] }> {
    const reply = await this.api.call('GET', '/user', user);
    // Classic tokens list their scopes; fine-grained tokens and app tokens send no such header.
    const header = reply.headers.get('x-oauth-scopes');
    const scopes = header === null ? undefined : header.split(',').map((scope) => scope.trim()).filter((scope) => scope !== '');
    return { login: reply.body.login, ...(scopes === undefined ? {} : { scopes }) };
  }

  async findOpenPullRequest(head: string, base: string): Promise<PullRequestView | undefined> {
    // `head` filters as owner:branch; pull requests from forks are not Warden's.
    const reply = await this.api.call('GET', this.path('/pulls'), z.array(pull), { query: { head: `${this.owner}:${head}`, base, state: 'open' } });
    const found = reply.body.find((candidate) => candidate.head.ref === head && candidate.base.ref === base);
    return found === undefined ? undefined : view(found);
  }

  async openPullRequest(request: OpenPullRequest): Promise<PullRequestView> {
    const created = await this.api.call('POST', this.path('/pulls'), pull, { body: { title: request.title, head: request.head, base: request.base, body: request.body } });
    // GitHub creates a label that does not exist yet when one is added to an issue.
    if (request.labels.length > 0) await this.api.call('POST', this.path(`/issues/${created.body.number}/labels`), z.unknown(), { body: { labels: [...request.labels] } });
    return view(created.body);
  }

  async pullRequest(number: number): Promise<PullRequestView> {
    return view((await this.api.call('GET', this.path(`/pulls/${number}`), pull)).body);
  }

  async updateBody(number: number, body: string): Promise<void> {
    await this.api.call('PATCH', this.path(`/pulls/${number}`), z.unknown(), { body: { body } });
  }

  async reviews(number: number): Promise<ForgeReview[]> {
    const reviews = await this.api.list(this.path(`/pulls/${number}/reviews`), review, { query: { per_page: PER_PAGE } });
    return reviews.map((item) => ({
      id: String(item.id),
      login: item.user?.login ?? '',
      // A state GitHub adds later counts as a comment, never as an approval.
      state: REVIEW_STATES[item.state] ?? 'commented',
      body: item.body ?? '',
      ...(item.commit_id ? { commitId: item.commit_id } : {}),
      ...(item.submitted_at ? { submittedAt: item.submitted_at } : {}),
      ...(item.html_url ? { url: item.html_url } : {}),
    }));
  }

  async comments(number: number): Promise<ForgeComment[]> {
    const comments = await this.api.list(this.path(`/issues/${number}/comments`), issueComment, { query: { per_page: PER_PAGE } });
    return comments.map((item) => ({
      id: String(item.id),
      login: item.user?.login ?? '',
      body: item.body ?? '',
      ...(item.created_at ? { createdAt: item.created_at } : {}),
      ...(item.html_url ? { url: item.html_url } : {}),
    }));
  }

  async comment(number: number, body: string): Promise<void> {
    await this.api.call('POST', this.path(`/issues/${number}/comments`), z.unknown(), { body: { body } });
  }

  async close(number: number): Promise<void> {
    await this.api.call('PATCH', this.path(`/pulls/${number}`), z.unknown(), { body: { state: 'closed' } });
  }

  async checks(sha: string): Promise<ForgeCheck[]> {
    const ref = encodeURIComponent(sha);
    // The combined status already holds the latest status per context.
    const statuses = await this.api.list(this.path(`/commits/${ref}/status`), commitStatus, { query: { per_page: PER_PAGE }, itemsIn: 'statuses' });
    const runs = await this.api.list(this.path(`/commits/${ref}/check-runs`), checkRun, { query: { per_page: PER_PAGE }, itemsIn: 'check_runs' });
    const fromStatuses = statuses.map((status) => ({
      context: status.context,
      state: status.state,
      ...(status.description ? { description: status.description } : {}),
      ...(status.target_url ? { url: status.target_url } : {}),
    }));
    // A re-run check keeps its name: the newest run (highest id) is the one that counts.
    const latestRuns = new Map<string, z.infer<typeof checkRun>>();
    for (const run of runs) if ((latestRuns.get(run.name)?.id ?? -1) < run.id) latestRuns.set(run.name, run);
    const fromRuns = [...latestRuns.values()].map((run) => ({
      context: run.name,
      state: checkRunState(run.status, run.conclusion ?? undefined),
      ...(run.output?.title ? { description: run.output.title } : {}),
      ...(run.html_url ? { url: run.html_url } : {}),
    }));
    return worstPerContext([...fromStatuses, ...fromRuns]);
  }

  /**
   * Classic branch protection and the repository's rulesets together: a branch protected by a
   * ruleset alone answers "Branch not protected" on the classic endpoint.
   */
  async branchRules(branch: string): Promise<BranchRules> {
    const name = encodeURIComponent(branch);
    let classic: z.infer<typeof protection> | undefined;
    try {
      classic = (await this.api.call('GET', this.path(`/branches/${name}/protection`), protection)).body;
    } catch (error) {
      // GitHub answers 404 "Branch not protected" for an unprotected branch; any other 404 (no
      // such branch, or a token that may not read the protection) stays an error, so that rules
      // Warden cannot read are never taken for no rules.
      if (!(error instanceof ForgeError && error.kind === 'not-found' && /branch not protected/i.test(error.message))) throw error;
    }
    const rules = await this.api.list(this.path(`/rules/branches/${name}`), rulesetRule, { query: { per_page: PER_PAGE } });
    const checks = classic?.required_status_checks;
    const contexts = new Set([...(checks?.contexts ?? []), ...(checks?.checks ?? []).map((check) => check.context)]);
    let approvals = classic?.required_pull_request_reviews?.required_approving_review_count ?? 0;
    for (const rule of rules) {
      if (rule.type === 'required_status_checks') for (const check of rule.parameters?.required_status_checks ?? []) contexts.add(check.context);
      if (rule.type === 'pull_request') approvals = Math.max(approvals, rule.parameters?.required_approving_review_count ?? 0);
    }
    return { protected: classic !== undefined || rules.length > 0, requiredChecks: [...contexts], requiredApprovals: approvals };
  }

  async merge(number: number, options: { readonly method: MergeMethod; readonly headSha: string; readonly title: string; readonly message: string }): Promise<{ mergeCommit: string }> {
    const reply = await this.api.call('PUT', this.path(`/pulls/${number}/merge`), mergeResult, {
      body: { merge_method: options.method, sha: options.headSha, commit_title: options.title, commit_message: options.message },
      merge: true,
    });
    return { mergeCommit: reply.body.sha };
  }

  private path(rest: string): string {
    return `/repos/${encodeURIComponent(this.owner)}/${encodeURIComponent(this.repo)}${rest}`;
  }
}

function view(item: Pull): PullRequestView {
  const merged = item.merged === true || (item.merged_at !== undefined && item.merged_at !== null);
  return {
    number: item.number,
    url: item.html_url,
    state: merged ? 'merged' : item.state,
    headBranch: item.head.ref,
    baseBranch: item.base.ref,
    headSha: item.head.sha,
    // Before a merge, merge_commit_sha is GitHub's trial merge, not a merge.
    ...(merged && item.merge_commit_sha ? { mergeCommit: item.merge_commit_sha } : {}),
    ...(item.mergeable === true || item.mergeable === false ? { mergeable: item.mergeable } : {}),
    ...(merged && item.merged_by ? { closedBy: item.merged_by.login } : {}),
  };
}

/**
 * A check run's status and conclusion as a commit status state. Neutral and skipped pass, as they
 * do for GitHub's own required checks; a run that could not finish (cancelled, timed out, stale)
 * is an error rather than a failure of the code.
 */
export function checkRunState(status: string, conclusion: string | undefined): CheckState {
  if (status !== 'completed') return 'pending';
  switch (conclusion) {
    case 'success':
    case 'neutral':
    case 'skipped':
      return 'success';
    case 'failure':
    case 'action_required':
      return 'failure';
    default:
      return 'error';
  }
}
