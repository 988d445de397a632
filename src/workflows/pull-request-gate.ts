import { ActivityFailure, ApplicationFailure, CancellationScope, condition, setHandler } from '@temporalio/workflow';
import type { PullRequestNews } from '../activities/forge-activities';
import type { Decision, RecordedDecision } from '../shared/decisions';
import { parseDuration } from '../shared/duration';
import { FailureType } from '../shared/errors';
import type { ForgeReview } from '../shared/forge';
import type { HaltDetails } from '../shared/halt';
import type { ForgeSettings } from '../shared/merge-settings';
import { forgeEventSignal } from '../shared/messages';
import { doneLineageDir, lineageRefFor } from '../shared/ids';
import { renderReviewPackage, type ReviewPackage } from '../shared/review-package';
import { GateRejected } from './approvals';
import type { IntentRun } from './run-context';

/**
 * The merge gate as a pull request on the team's forge (`merge.via: pull-request`).
 *
 * The change (without its lineage) is pushed to `warden/<id>` and a pull request opened whose
 * description is the review package. While the merge gate waits, the pull request is read every
 * `pollEvery` (a verified webhook delivery wakes it sooner, see forgeEventSignal): an approving
 * review by a reviewer the config maps to an approver decides the gate as that approver; their
 * "request changes" review, or a comment starting with the changes command, sends the work back
 * to impl with its text; anyone else's review is recorded and counts for nothing. Warden's own
 * decisions still count, and are told on the pull request. After approval the forge's required
 * checks must pass (waited for within the gate's timeout), and the merge goes through the forge.
 */

/** What the workflow keeps of its pull request between gate openings. */
interface PullRequestWatch {
  /** Reviews and comments already handled (`review:<id>`, `comment:<id>`): each counts once. */
  readonly seen: Set<string>;
  /** A webhook said something happened: read now. */
  nudged: boolean;
  round: number;
  /** What happened since the pull request was last told: gates that opened, layers that fired. */
  untold: string[];
}

/** Rows told on the pull request besides those of medium severity and above. */
const TOLD_ALWAYS: readonly string[] = ['GATE_REQUESTED', 'GATE_DECIDED'];
/** Lines of one comment. */
const MAX_TOLD = 20;

const watches = new WeakMap<IntentRun, PullRequestWatch>();

function watchOf(run: IntentRun): PullRequestWatch {
  let watch = watches.get(run);
  if (!watch) {
    const made: PullRequestWatch = { seen: new Set(), nudged: false, round: 0, untold: [] };
    setHandler(forgeEventSignal, () => {
      made.nudged = true;
    });
    // Once the pull request exists, what the safety layers and the gates do is said there too.
    run.ledger.observer = (type, severity, reason) => {
      if (!run.state.pullRequest || type.startsWith('PULL_REQUEST_') || type.startsWith('FORGE_')) return;
      // The merge gate is the pull request itself: its opening and decision are said there in their own words.
      if (TOLD_ALWAYS.includes(type) && run.state.pendingGate?.gate === 'merge') return;
      if (!TOLD_ALWAYS.includes(type) && severity !== 'medium' && severity !== 'high' && severity !== 'critical') return;
      made.untold.push(`- ${type} (${severity}): ${reason.split('\n')[0]!.slice(0, 300)}`);
    };
    watches.set(run, made);
    watch = made;
  }
  return watch;
}

function forgeOf(run: IntentRun): ForgeSettings {
  return run.intent.merge.forge!;
}

/** The longest wait between two reads of a pull request on which nothing happens. */
const MAX_POLL_MS = 10 * 60_000;

/**
 * How long to wait before reading the pull request again: `pollEvery` at first, then half as long
 * again each time nothing happened, up to ten minutes, back to `pollEvery` when something did (or a
 * webhook said so). A gate that waits a day then costs its history a few hundred reads, not
 * thousands.
 */
class PollInterval {
  private current: number;
  constructor(private readonly base: number) {
    this.current = base;
  }
  next(): number {
    const wait = this.current;
    this.current = Math.min(Math.max(this.base, MAX_POLL_MS), Math.round(this.current * 1.5));
    return wait;
  }
  reset(): void {
    this.current = this.base;
  }
}

/** Whether this intent's change goes to the base through a pull request. */
export function mergesViaPullRequest(run: IntentRun): boolean {
  // `?.`: an intent from before merge settings existed (its history) has none, and merges locally.
  // A revert (`warden revert`) has no triage or review to put in a pull request: it merges in the repository.
  return run.intent.merge?.via === 'pull-request' && run.intent.merge.forge !== undefined && !run.intent.revertOf;
}

/**
 * Publishes the change and opens (or updates) the pull request, then waits at the merge gate for
 * a decision from Warden or from the forge. Returns the gate's decision.
 */
export async function pullRequestMergeGate(run: IntentRun, prompt: string): Promise<RecordedDecision> {
  const watch = watchOf(run);
  const pr = await publish(run, watch);
  const decision = await watchWhile(run, watch, pr.number, () => run.gates.decide('merge', `${prompt} Pull request: ${pr.url}`, { changes: true }));
  if (!decision.via) {
    const how = decision.by.startsWith('warden') ? '' : decision.signed ? ' (signed)' : ' (unsigned)';
    await comment(run, pr.number, `Warden: the merge gate was decided in Warden: **${decision.decision}** by ${decision.by}${how}${decision.reason ? `: ${decision.reason}` : ''}.`);
  }
  return decision;
}

/** Pushes the change and opens or updates the pull request; PULL_REQUEST_OPENED / _UPDATED. */
async function publish(run: IntentRun, watch: PullRequestWatch): Promise<{ number: number; url: string }> {
  const { intent, state, ledger } = run;
  watch.round += 1;
  const pkg = await run.activities.git.buildReviewPackage({
    intent,
    facts: { triage: run.triage!, review: run.review, tests: state.tests, spendUsd: state.spendUsd, ladderLevel: run.ladderLevel },
  });
  const forge = forgeOf(run);
  const subject = intent.goal.split('\n')[0]!.trim();
  const published = await forgeStep('push the change and open its pull request', () =>
    run.activities.forge.publishPullRequest({
      intent,
      title: `warden: ${subject.length > 90 ? `${subject.slice(0, 89)}…` : subject}`,
      body: pullRequestBody(run, pkg),
      labels: [...forge.labels, `risk:${run.triage?.risk ?? 'unknown'}`],
      round: watch.round,
    }),
  );
  state.pullRequest = { number: published.number, url: published.url, headSha: published.headSha };
  const what = published.opened ? `opened pull request #${published.number}` : published.pushed ? `pushed a new commit to pull request #${published.number}` : `updated pull request #${published.number}`;
  ledger.event(published.opened ? 'PULL_REQUEST_OPENED' : 'PULL_REQUEST_UPDATED', 'info', `${what}: ${published.url} (head ${published.headSha.slice(0, 12)})`, {
    stage: 'merge',
    metadata: { number: published.number, url: published.url, headSha: published.headSha, round: watch.round, pushed: published.pushed },
  });
  await ledger.flush();
  await tellUntold(run, watch);
  if (!published.opened) {
    await comment(run, published.number, published.pushed ? `Warden: new commit ${published.headSha.slice(0, 12)} after the changes asked for; the merge gate is open again.` : 'Warden: the merge gate is open again.');
  }
  return published;
}

/** The pull request's description: the review package, and where the rest of the record is. */
function pullRequestBody(run: IntentRun, pkg: ReviewPackage): string {
  const { intent } = run;
  return [
    `Opened by Warden for intent \`${intent.id}\`. The merge gate decides here: an approving review by a mapped reviewer approves; "Request changes" or a comment starting with \`${forgeOf(run).changesCommand}\` sends the work back; the forge's required checks must pass before Warden merges.`,
    '',
    renderReviewPackage(pkg),
    '',
    `Lineage (prompts, answers, every attempt's commit): \`${intent.lineage.location === 'ref' ? lineageRefFor(intent.id) : doneLineageDir(intent.id)}\` in the repository Warden worked in; the ledger: \`warden audit ${intent.id}\`.`,
  ]
    .join('\n')
    .slice(0, 60_000);
}

/**
 * Runs `waiting` (the merge gate) while the pull request is read every `pollEvery`, or at once
 * when a webhook says something happened, turning what is new on it into decisions.
 */
async function watchWhile<T>(run: IntentRun, watch: PullRequestWatch, number: number, waiting: () => Promise<T>): Promise<T> {
  let done = false;
  const poll = new PollInterval(parseDuration(forgeOf(run).pollEvery));
  const watcher = (async (): Promise<never> => {
    while (!done) {
      const nudged = await condition(() => done || watch.nudged, poll.next());
      watch.nudged = false;
      if (done || !run.state.pendingGate) continue;
      const news = await read(run, watch, number);
      if (nudged || news.reviews.length > 0 || news.commands.length > 0) poll.reset();
      if (!done) handleNews(run, watch, news);
      await tellUntold(run, watch);
    }
    // Once the gate is decided the watcher has nothing to say: it never settles the race below.
    return new Promise<never>(() => undefined);
  })();
  try {
    // A forge that fails for good while the gate waits ends the wait with its halt.
    return await Promise.race([waiting(), watcher]);
  } finally {
    done = true;
  }
}

async function read(run: IntentRun, watch: PullRequestWatch, number: number): Promise<PullRequestNews> {
  return forgeStep(`read pull request #${number}`, () => run.activities.forge.readPullRequest({ intent: run.intent, number, seen: [...watch.seen] }));
}

/** Turns what is new on the pull request into decisions at the pending merge gate. */
function handleNews(run: IntentRun, watch: PullRequestWatch, news: PullRequestNews): void {
  const { state, ledger } = run;
  const forge = forgeOf(run);
  const pr = state.pullRequest!;
  if (news.state !== 'open') {
    const by = news.closedBy ? ` by ${news.closedBy}` : '';
    ledger.event('PULL_REQUEST_CLOSED', 'medium', `pull request #${pr.number} was ${news.state}${by} on the forge while Warden waited: the intent ends rejected`, {
      stage: 'merge',
      metadata: { number: pr.number, state: news.state, ...(news.closedBy ? { closedBy: news.closedBy } : {}), ...(news.mergeCommit ? { mergeCommit: news.mergeCommit } : {}) },
      suggestion: 'reopen the work with warden resume ID --from impl, or start a new intent',
    });
    run.gates.endFromForge(`pull request #${pr.number} was ${news.state}${by} on the forge`, `forge: ${pr.url}`);
    return;
  }
  for (const review of news.reviews) {
    watch.seen.add(`review:${review.id}`);
    const approver = forge.reviewers[review.login];
    const verdict = review.state === 'approved' ? 'approve' : review.state === 'changes-requested' ? 'request-changes' : undefined;
    if (!approver || !verdict) {
      ledger.event('FORGE_REVIEW_IGNORED', 'info', `${review.state} review by ${review.login} on pull request #${pr.number}: ${!approver ? 'not a reviewer the config maps to an approver' : 'not a decision'}; it counts for nothing`, {
        stage: 'merge',
        metadata: { login: review.login, state: review.state, reviewId: review.id, ...(review.url ? { url: review.url } : {}) },
      });
      continue;
    }
    if (verdict === 'approve' && review.commitId && review.commitId !== pr.headSha) {
      ledger.event('FORGE_REVIEW_IGNORED', 'info', `approving review by ${review.login} is of commit ${review.commitId.slice(0, 12)}, not the pull request's head ${pr.headSha.slice(0, 12)}; it counts for nothing`, {
        stage: 'merge',
        metadata: { login: review.login, state: review.state, reviewId: review.id, commitId: review.commitId },
      });
      continue;
    }
    offer(run, review, approver, verdict, review.body);
  }
  for (const command of news.commands) {
    watch.seen.add(`comment:${command.id}`);
    const approver = forge.reviewers[command.login];
    if (!approver) {
      ledger.event('FORGE_REVIEW_IGNORED', 'info', `"${forge.changesCommand}" comment by ${command.login} on pull request #${pr.number}: not a reviewer the config maps to an approver; it counts for nothing`, {
        stage: 'merge',
        metadata: { login: command.login, commentId: command.id },
      });
      continue;
    }
    const text = command.body.trimStart().slice(forge.changesCommand.length).trim();
    offer(run, { id: command.id, login: command.login, state: 'changes-requested', body: text, ...(command.url ? { url: command.url } : {}) }, approver, 'request-changes', text);
  }
}

function offer(run: IntentRun, review: ForgeReview, approver: string, verdict: 'approve' | 'request-changes', text: string): void {
  if (!run.state.pendingGate) return;
  const pr = run.state.pullRequest!;
  const via = `${review.state === 'approved' ? 'approving review' : 'changes asked'} by ${review.login} on the forge: ${review.url ?? pr.url}`;
  const decision: Decision = { gate: run.state.pendingGate.gate, decision: verdict, by: approver, ...(text ? { reason: text.slice(0, 2000) } : verdict === 'request-changes' ? { reason: 'changes asked on the pull request' } : {}) };
  const refused = run.gates.offerFromForge(decision, via);
  run.ledger.event(refused ? 'FORGE_REVIEW_IGNORED' : 'FORGE_REVIEW_COUNTED', refused ? 'medium' : 'info', `${via}: ${refused ? `refused (${refused})` : `${verdict} as ${approver}`}`, {
    stage: 'merge',
    metadata: { login: review.login, approver, decision: verdict, reviewId: review.id },
  });
}

/**
 * After the gate approved: the forge's required checks on the pull request's head, waited for
 * within the merge gate's timeout (a webhook wakes the wait). Undefined once they pass; what impl
 * must fix when one fails or a mapped reviewer asks for changes meanwhile. A timeout escalates
 * and, under the gate's timeout policy, waits once more or rejects.
 */
export async function forgeChecksUnmet(run: IntentRun): Promise<string | undefined> {
  const { intent, ledger, state } = run;
  const watch = watchOf(run);
  const pr = state.pullRequest!;
  const settings = run.gates.settings('merge');
  const timeout = settings.timeout ?? intent.limits.gateTimeout;
  const poll = new PollInterval(parseDuration(forgeOf(run).pollEvery));
  let deadline = Date.now() + parseDuration(timeout);
  let waitedOnce = false;
  let told = false;
  for (;;) {
    const report = await forgeStep(`read the checks of pull request #${pr.number}`, () => run.activities.forge.checkPullRequest({ intent, headSha: pr.headSha }));
    const lines = [...report.checks.map((c) => `- ${c.context}: ${c.state}${c.description ? ` (${c.description.slice(0, 200)})` : ''}`), ...report.missing.map((c) => `- ${c}: not reported yet`)];
    if (report.verdict === 'passed') {
      ledger.event('FORGE_CHECKS_PASSED', 'info', `the forge's checks on ${pr.headSha.slice(0, 12)} passed${lines.length ? `:\n${lines.join('\n')}` : ' (none required)'}`, { stage: 'merge', metadata: { number: pr.number, headSha: pr.headSha, checks: report.checks.map((c) => c.context) } });
      await ledger.flush();
      return undefined;
    }
    if (report.verdict === 'failed') {
      ledger.event('FORGE_CHECKS_FAILED', 'medium', `the forge's checks on ${pr.headSha.slice(0, 12)} failed:\n${lines.join('\n')}`.slice(0, 4000), {
        stage: 'merge',
        metadata: { number: pr.number, headSha: pr.headSha, failed: report.checks.filter((c) => c.state === 'failure' || c.state === 'error').map((c) => c.context) },
        suggestion: 'impl runs again with what failed; the gates are asked again after review',
      });
      await ledger.flush();
      return `The forge's required checks failed on the pull request. Make them pass:\n${lines.join('\n')}`;
    }
    if (!told) {
      told = true;
      ledger.event('FORGE_CHECKS_WAITING', 'info', `waiting for the forge's checks on ${pr.headSha.slice(0, 12)} (at most ${timeout}):\n${lines.join('\n')}`.slice(0, 4000), { stage: 'merge', metadata: { number: pr.number, headSha: pr.headSha } });
      await ledger.flush();
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      const policy = settings.onTimeout ?? 'reject';
      ledger.event('GATE_ESCALATED', 'high', `the forge's checks on pull request #${pr.number} did not pass within ${timeout}; escalated to ${settings.escalateTo ?? 'the intent owner'}; timeout policy: ${policy === 'wait-again' && !waitedOnce ? 'wait once more' : 'reject'}`, {
        stage: 'merge',
        metadata: { gate: 'merge', number: pr.number, pending: lines },
        suggestion: "see why the forge's checks have not finished, or set gates.merge.timeout / onTimeout",
      });
      await ledger.flush();
      if (policy === 'wait-again' && !waitedOnce) {
        waitedOnce = true;
        deadline = Date.now() + parseDuration(timeout);
        continue;
      }
      throw new GateRejected('merge', `the forge's checks did not pass within ${timeout}`);
    }
    if (await condition(() => watch.nudged, Math.min(poll.next(), remaining))) poll.reset();
    watch.nudged = false;
    // Meanwhile a mapped reviewer may ask for changes, or someone close the pull request.
    const news = await read(run, watch, pr.number);
    if (news.state !== 'open') throw new GateRejected('merge', `pull request #${pr.number} was ${news.state}${news.closedBy ? ` by ${news.closedBy}` : ''} on the forge`);
    const sentBack = changesAskedMeanwhile(run, watch, news);
    if (sentBack) return sentBack;
  }
}

/** A mapped reviewer's request for changes that arrived while the checks ran; other news is only marked seen. */
function changesAskedMeanwhile(run: IntentRun, watch: PullRequestWatch, news: PullRequestNews): string | undefined {
  const forge = forgeOf(run);
  let asked: string | undefined;
  for (const review of news.reviews) {
    watch.seen.add(`review:${review.id}`);
    const approver = forge.reviewers[review.login];
    if (approver && review.state === 'changes-requested' && asked === undefined) asked = `At the pull request, ${approver} (${review.login}) asked for changes. Make them, and keep what they did not ask to change:\n${review.body}`;
  }
  for (const command of news.commands) {
    watch.seen.add(`comment:${command.id}`);
    const approver = forge.reviewers[command.login];
    if (approver && asked === undefined) asked = `At the pull request, ${approver} (${command.login}) asked for changes. Make them, and keep what they did not ask to change:\n${command.body.trimStart().slice(forge.changesCommand.length).trim()}`;
  }
  if (asked) run.ledger.event('FORGE_REVIEW_COUNTED', 'info', `changes asked on pull request #${run.state.pullRequest!.number} while its checks ran: impl runs again`, { stage: 'merge' });
  return asked;
}

/** Merges through the forge with the configured method; PULL_REQUEST_MERGED. Returns the merge commit. */
export async function mergeThroughForge(run: IntentRun): Promise<string> {
  const { intent, ledger, state } = run;
  const pr = state.pullRequest!;
  const watch = watchOf(run);
  const timeout = run.gates.settings('merge').timeout ?? intent.limits.gateTimeout;
  const deadline = Date.now() + parseDuration(timeout);
  let refusal: string | undefined;
  let mergeCommit: string | undefined;
  // The forge may refuse for a while (still checking the change, or a rule of its own not met yet): wait within the gate's timeout.
  while (mergeCommit === undefined) {
    const answer = await forgeStep(`merge pull request #${pr.number}`, () => run.activities.forge.mergePullRequest({ intent, number: pr.number, headSha: pr.headSha, method: intent.merge.method }));
    if ('mergeCommit' in answer) {
      mergeCommit = answer.mergeCommit;
      break;
    }
    if (refusal === undefined) {
      ledger.event('FORGE_CHECKS_WAITING', 'info', `the forge does not merge pull request #${pr.number} yet (${answer.notYet.slice(0, 300)}); Warden tries again for at most ${timeout}`, { stage: 'merge', metadata: { number: pr.number } });
      await ledger.flush();
    }
    refusal = answer.notYet;
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      ledger.event('GATE_ESCALATED', 'high', `the forge did not merge pull request #${pr.number} within ${timeout}: ${refusal.slice(0, 300)}`, { stage: 'merge', metadata: { gate: 'merge', number: pr.number }, suggestion: "see the pull request's page for what the forge still asks for" });
      await ledger.flush();
      throw new GateRejected('merge', `the forge did not merge pull request #${pr.number} within ${timeout}: ${refusal.slice(0, 300)}`);
    }
    await condition(() => watch.nudged, Math.min(parseDuration(forgeOf(run).pollEvery), remaining));
    watch.nudged = false;
  }
  ledger.event('PULL_REQUEST_MERGED', 'info', `pull request #${pr.number} merged through the forge (${intent.merge.method}) as ${mergeCommit.slice(0, 12)}: ${pr.url}`, {
    stage: 'merge',
    metadata: { number: pr.number, url: pr.url, headSha: pr.headSha, mergeCommit, method: intent.merge.method },
  });
  await ledger.flush();
  return mergeCommit;
}

/** Closes the intent's open pull request with the reason, however the intent ended without merging. Never throws. */
export async function closePullRequestAtEnd(run: IntentRun, reason: string): Promise<void> {
  const pr = run.state.pullRequest;
  if (!pr || run.state.status === 'merged') return;
  const untold = watches.get(run)?.untold.splice(0, MAX_TOLD) ?? [];
  if (untold.length > 0) reason = `${reason}\n\nWhat happened before:\n${untold.join('\n')}`;
  try {
    const { closed } = await CancellationScope.nonCancellable(() => run.activities.forge.closePullRequest({ intent: run.intent, number: pr.number, reason: `Warden: the intent ended ${run.state.status}: ${reason}` }));
    if (closed) run.ledger.event('PULL_REQUEST_CLOSED', 'info', `closed pull request #${pr.number}: the intent ended ${run.state.status} (${reason.slice(0, 300)})`, { stage: run.state.stage, metadata: { number: pr.number, url: pr.url } });
  } catch (error) {
    run.ledger.event('FORGE_FAILED', 'medium', `could not close pull request #${pr.number} (${pr.url}): ${failureMessage(error)}`, { stage: run.state.stage, suggestion: 'close it on the forge by hand' });
  }
}

/** Says on the pull request what happened since it was last told, in one comment. */
async function tellUntold(run: IntentRun, watch: PullRequestWatch): Promise<void> {
  const pr = run.state.pullRequest;
  if (!pr || watch.untold.length === 0) return;
  const lines = watch.untold.splice(0);
  const more = lines.length > MAX_TOLD ? `\n… and ${lines.length - MAX_TOLD} more (warden audit ${run.intent.id})` : '';
  await comment(run, pr.number, `Warden, since the last word here:\n${lines.slice(0, MAX_TOLD).join('\n')}${more}`);
}

async function comment(run: IntentRun, number: number, body: string): Promise<void> {
  await forgeStep(`comment on pull request #${number}`, () => run.activities.forge.commentOnPullRequest({ intent: run.intent, number, body }));
}

/**
 * A forge call that, when it fails for good (a wrong token, a protected branch, a forge that stays
 * unreachable), halts the intent with a FORGE_FAILED row saying what it was doing.
 */
async function forgeStep<T>(doing: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (!(error instanceof ActivityFailure)) throw error;
    const message = failureMessage(error);
    const details: HaltDetails = { eventType: 'FORGE_FAILED', reason: `could not ${doing}: ${message}`, suggestion: "check the worker's forge token and its scopes (warden doctor), the remote and the branch protection, then warden resume ID --from review", current: 0, threshold: 0 };
    throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `FORGE_FAILED: could not ${doing}: ${message}`, nonRetryable: true, details: [details] });
  }
}

function failureMessage(error: unknown): string {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return (cause as Error | undefined)?.message ?? String(error);
}
