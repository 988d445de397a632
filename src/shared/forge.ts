/**
 * What Warden knows of a pull request on a team's forge (Gitea, GitHub, GitLab), in one shape for
 * every forge. The workflow decides on these values; the adapters in src/forge fill them in.
 */
export const FORGE_KINDS = ['gitea', 'github', 'gitlab'] as const;
export type ForgeKind = (typeof FORGE_KINDS)[number];

export const MERGE_METHODS = ['merge', 'squash', 'rebase'] as const;
export type MergeMethod = (typeof MERGE_METHODS)[number];

/** A review's verdict. `pending` is a review not yet submitted; `dismissed` one taken back on the forge. */
export type ForgeReviewState = 'approved' | 'changes-requested' | 'commented' | 'pending' | 'dismissed';

export interface ForgeReview {
  /** The forge's id for the review, unique within the pull request. */
  readonly id: string;
  readonly login: string;
  readonly state: ForgeReviewState;
  readonly body: string;
  /** The commit the review was made on, where the forge says. */
  readonly commitId?: string;
  readonly submittedAt?: string;
  /** The review's page on the forge, where it has one. */
  readonly url?: string;
}

export interface ForgeComment {
  readonly id: string;
  readonly login: string;
  readonly body: string;
  readonly createdAt?: string;
  readonly url?: string;
}

export type PullRequestState = 'open' | 'closed' | 'merged';

export interface PullRequestView {
  readonly number: number;
  readonly url: string;
  readonly state: PullRequestState;
  readonly headBranch: string;
  readonly baseBranch: string;
  readonly headSha: string;
  /** Set once merged. */
  readonly mergeCommit?: string;
  /** The forge's own answer; undefined while it is still working it out. */
  readonly mergeable?: boolean;
  /** Who closed or merged it, where the forge says. */
  readonly closedBy?: string;
}

/** One status check (commit status or check run) on a commit. */
export type CheckState = 'success' | 'pending' | 'failure' | 'error';
export interface ForgeCheck {
  readonly context: string;
  readonly state: CheckState;
  readonly description?: string;
  readonly url?: string;
}

/** The base branch's protection, as far as Warden must honour it. */
export interface BranchRules {
  readonly protected: boolean;
  /** Status check contexts that must succeed before a merge. */
  readonly requiredChecks: readonly string[];
  /** Approving reviews the forge itself requires. */
  readonly requiredApprovals: number;
}
