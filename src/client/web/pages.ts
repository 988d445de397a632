import type { WaitingGate } from '../list-intents';
import type { IntentState } from '../../shared/state';
import type { ReviewPackage } from '../../shared/review-package';
import { MERGE_CONDITION_FORMS } from '../../shared/merge-conditions';

/**
 * The web app's pages: plain server-rendered HTML that reads well on a phone, with no script.
 * Every value from an intent passes through `esc`: goals, diffs and documents are agent-written.
 */

export function esc(text: unknown): string {
  return String(text ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const STYLE = `
body{font:16px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#1b1f23;background:#fff}
h1{font-size:1.35rem}h2{font-size:1.1rem;margin-top:1.6rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem .4rem;border-bottom:1px solid #eee;vertical-align:top}
pre{background:#f6f8fa;padding:.6rem;overflow-x:auto;font-size:.85rem;white-space:pre-wrap;word-break:break-word}
.diff .add{background:#e6ffec}.diff .del{background:#ffebe9}.diff .hunk{color:#6a737d}
.who{background:#fff8c5;padding:.6rem;border-radius:6px}.ok{background:#dafbe1;padding:.6rem;border-radius:6px}.bad{background:#ffebe9;padding:.6rem;border-radius:6px}
form.decide{display:grid;gap:.5rem;margin:.8rem 0;padding:.8rem;border:1px solid #ddd;border-radius:6px}
textarea{width:100%;min-height:4rem;font:inherit}button{font:inherit;padding:.5rem 1rem;border-radius:6px;border:1px solid #888;background:#f6f8fa}
button.approve{background:#2da44e;color:#fff;border-color:#2da44e}button.reject{background:#cf222e;color:#fff;border-color:#cf222e}
.muted{color:#6a737d;font-size:.9rem}`;

export function layout(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${esc(title)} · Warden</title><style>${STYLE}</style></head><body>${body}<p class="muted">Warden</p></body></html>`;
}

export function messagePage(title: string, message: string, ok: boolean, back?: string): string {
  return layout(title, `<h1>${esc(title)}</h1><p class="${ok ? 'ok' : 'bad'}" role="status">${esc(message)}</p>${back ? `<p><a href="${esc(back)}">Back to the gate</a></p>` : ''}`);
}

export function inboxPage(gates: ReadonlyArray<WaitingGate & { readonly page: string }>): string {
  const rows = gates
    .map((g) => `<tr><td><a href="${esc(g.page)}">${esc(g.intentId)}</a></td><td>${esc(g.gate)}</td><td>${esc(g.prompt)}</td><td>${g.ageMinutes} min</td><td>${esc(g.timeoutAt)}</td></tr>`)
    .join('');
  const body = gates.length === 0 ? '<p>No gate is waiting for a decision.</p>' : `<table><thead><tr><th>Intent</th><th>Gate</th><th>Asks</th><th>Waiting</th><th>Times out</th></tr></thead><tbody>${rows}</tbody></table>`;
  return layout('Inbox', `<h1>Waiting for a decision</h1>${body}`);
}

/** Who a decision from this page is made as, and whether it will be signed. */
export interface DecidingAs {
  readonly approver: string;
  readonly via: 'link' | 'session';
  readonly signed: boolean;
  readonly expiresAt?: string;
  /** A link made for the operator, as its channel named no approver. */
  readonly asOperator?: boolean;
}

/** A page opened from a view link: why it cannot decide, and the commands that can. */
export interface ViewOnly {
  readonly why: string;
  readonly commands: { readonly approve: string; readonly reject: string };
}

/**
 * What a gate page shows of its intent: the workflow's state while it runs; once it has ended, the
 * ledger's record and the server's word on how it ended (no query, which would replay its history).
 */
export interface GateShown {
  readonly goal: string;
  readonly status: string;
  readonly spendUsd: string;
  readonly pendingGate?: IntentState['pendingGate'];
  readonly decisions: ReadonlyArray<{ readonly gate: string; readonly decision: string; readonly by: string; readonly signed?: boolean; readonly at: string }>;
}

export interface GateView {
  readonly intentId: string;
  readonly gate: string;
  readonly state: GateShown;
  readonly as?: DecidingAs;
  /** Set when the page was opened from a view link: it shows the gate and cannot decide it. */
  readonly viewOnly?: ViewOnly;
  /** Hidden form fields that carry the right to decide (the link's token, the CSRF token). */
  readonly hidden: Readonly<Record<string, string>>;
  readonly action: string;
  readonly documents: ReadonlyArray<{ readonly name: string; readonly text: string }>;
  readonly diff?: string;
  /** The text of the document an edit would replace (pending.editable), when it can be read here. */
  readonly editableText?: string;
  /** Conditions here are checks before the merge (see merge-conditions.ts). */
  readonly mergeChecks: boolean;
}

/** The figures a decision turns on, read first: risk, size, spend, tests, review, and the files. */
function packageSummaryHtml(p: ReviewPackage): string {
  const files = p.diffSummary.map((f) => `<tr><td>${esc(f.path)}</td><td>+${f.added}</td><td>−${f.deleted}</td></tr>`).join('');
  const findings = (p.review?.findings ?? []).map((f) => `<li>[${esc(f.severity)}/${esc(f.category)}] ${esc(f.message)}${f.path ? ` (${esc(f.path)})` : ''}</li>`).join('');
  return `<h2>Review package</h2>
<table>
<tr><th>Risk</th><td>${esc(p.risk.class)}, confidence ${Math.round(p.risk.confidence * 100)}%${p.risk.rationale ? ` — ${esc(p.risk.rationale)}` : ''}</td></tr>
<tr><th>Predicted vs actual</th><td>files ${p.predicted.files ?? '?'} → ${p.actual.files}, lines ${p.predicted.lines ?? '?'} → ${p.actual.lines} (+${p.actual.added} −${p.actual.deleted})</td></tr>
<tr><th>Spend</th><td>$${esc(p.actual.spendUsd)}</td></tr>
<tr><th>Tests</th><td>${p.tests.map((t) => `attempt ${t.attempt}: ${t.passed ? 'passed' : 'failed'} (${esc(t.summary)})`).join('<br>') || 'not run'}</td></tr>
${p.review ? `<tr><th>Review</th><td>${esc(p.review.verdict)}${p.review.summary ? ` — ${esc(p.review.summary)}` : ''}${findings ? `<ul>${findings}</ul>` : ''}</td></tr>` : ''}
${p.secrets ? `<tr><th>Secrets</th><td>${p.secrets.held.length} held back from the change (never committed), ${p.secrets.allowed.length} let in by the config's secrets.allow<ul>${[...p.secrets.held.map((s) => `<li>held back: ${esc(s)}</li>`), ...p.secrets.allowed.map((s) => `<li>ALLOWED: ${esc(s)}</li>`)].join('')}</ul></td></tr>` : ''}
<tr><th>Branch</th><td>${esc(p.branch)} → ${esc(p.baseBranch)}${p.environment ? ` (${esc(p.environment)})` : ''}</td></tr>
<tr><th>Agent</th><td>${esc(p.agent)} at L${p.ladderLevel}</td></tr>
${p.attempts && p.attempts.total > 0 ? `<tr><th>Tried in its sandbox</th><td>${p.attempts.total} (this gate is a person's)<ul>${p.attempts.listed.map((a) => `<li>${esc(a)}</li>`).join('')}</ul>${p.attempts.total > p.attempts.listed.length ? `… and ${p.attempts.total - p.attempts.listed.length} more (warden audit lists each)` : ''}</td></tr>` : ''}
</table>
<h2>Files changed</h2><table>${files}</table>${p.moreFiles > 0 ? `<p>… and ${p.moreFiles} more file(s)</p>` : ''}`;
}

/** A design gate's facts: what its document passed, triage's predicted size, and the design reviewer's verdict and findings. */
function documentFactsHtml(d: NonNullable<IntentState['pendingGate']>['document'] & object): string {
  const r = d.review;
  const review = r
    ? `<tr><th>Design review</th><td>${esc(r.verdict)} by ${esc(r.reviewer)} (${esc(r.model)})${r.summary ? ` — ${esc(r.summary)}` : ''}<ul>${r.findings.map((f) => `<li>[${esc(f.severity)}/${esc(f.category)}] ${esc(f.message)}${f.path ? ` (${esc(f.path)})` : ''}</li>`).join('')}</ul>${r.total > r.findings.length ? `… and ${r.total - r.findings.length} more` : ''}</td></tr>`
    : '';
  return `<h2>The document</h2><table><tr><th>Checks</th><td>${esc(d.checks)} (attempt ${d.attempts})</td></tr><tr><th>Predicted size</th><td>${d.predicted ? `files ${d.predicted.files}, lines ${d.predicted.lines}` : 'none given'}</td></tr>${review}</table>`;
}

/** What backs the figures, read after deciding if at all: the plan and the ledger trace. */
function packageDetailsHtml(p: ReviewPackage): string {
  return `<h2>Plan</h2><pre>${esc(p.plan || '(no design written)')}</pre><h2>Ledger trace</h2><pre>${esc(p.ledgerTrace.join('\n'))}</pre>`;
}

function diffHtml(diff: string): string {
  const lines = diff.split('\n').map((line) => {
    const cls = line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    return cls ? `<span class="${cls}">${esc(line)}</span>` : esc(line);
  });
  return `<h2>Diff</h2><pre class="diff">${lines.join('\n')}</pre>`;
}

function hiddenFields(hidden: Readonly<Record<string, string>>): string {
  return Object.entries(hidden)
    .map(([name, value]) => `<input type="hidden" name="${esc(name)}" value="${esc(value)}">`)
    .join('');
}

export function gatePage(v: GateView): string {
  const pending = v.state.pendingGate;
  const waiting = pending?.gate === v.gate;
  const decided = [...v.state.decisions].reverse().find((d) => d.gate === v.gate);
  const head = `<h1>${esc(v.intentId)}: the ${esc(v.gate)} gate</h1><p><strong>Goal:</strong> ${esc(v.state.goal)}</p>`;
  const status = waiting
    ? `<p>${esc(pending.prompt)}</p><p class="muted">Waiting since ${esc(pending.requestedAt)}; times out at ${esc(pending.timeoutAt)}. Spend so far $${esc(v.state.spendUsd)}.</p>`
    : `<p class="bad" role="status">This gate is not waiting for a decision${decided ? `: ${esc(decided.decision)} by ${esc(decided.by)}${decided.signed === undefined ? '' : decided.signed ? ' (signed)' : ' (unsigned)'} at ${esc(decided.at)}` : ''}. The intent is ${esc(v.state.status)}.</p>`;
  let decide = '';
  if (waiting && v.as) {
    const fields = hiddenFields(v.hidden);
    const signing = v.as.signed ? `signed with ${esc(v.as.approver)}'s key on this machine` : `unsigned: ${esc(v.as.approver)} has no key on this machine, so it counts only at gates that take unsigned decisions, and only if ${esc(v.as.approver)} has no key in the config either`;
    decide = `<h2>Decide</h2>
<p class="who" id="deciding-as">Deciding as <strong>${esc(v.as.approver)}</strong> (${v.as.via === 'link' ? `from a link made for ${esc(v.as.approver)}${v.as.asOperator ? ', this Warden’s operator, as no approver is named for the notification’s channel' : ''}${v.as.expiresAt ? `, valid until ${esc(v.as.expiresAt)}, once` : ''}` : 'this machine’s operator'}); ${signing}.</p>
<form class="decide" method="post" action="${esc(v.action)}">${fields}<input type="hidden" name="decision" value="approve">
<label>Reason (optional)<textarea name="reason"></textarea></label><button class="approve" type="submit">Approve</button></form>
<form class="decide" method="post" action="${esc(v.action)}">${fields}<input type="hidden" name="decision" value="approve-with-conditions">
<label>Conditions, one per line${v.mergeChecks ? ` — checked before the merge: ${esc(MERGE_CONDITION_FORMS)}` : ' — the next stage must respect them'}<textarea name="conditions" required></textarea></label><button type="submit">Approve with conditions</button></form>
${
  pending.changes
    ? `<form class="decide" method="post" action="${esc(v.action)}">${fields}<input type="hidden" name="decision" value="request-changes">
<label>Changes to make (the stage runs again with these comments)<textarea name="reason" required></textarea></label><button type="submit">Request changes</button></form>`
    : ''
}${
  pending.editable && v.editableText !== undefined
    ? `<form class="decide" method="post" action="${esc(v.action)}">${fields}<input type="hidden" name="decision" value="approve-with-edits">
<label>Edit the document, then approve your version (the next stage gets it; the ledger keeps both)<textarea name="document" rows="20" required>${esc(v.editableText)}</textarea></label><button type="submit">Approve my edits</button></form>`
    : ''
}
<form class="decide" method="post" action="${esc(v.action)}">${fields}<input type="hidden" name="decision" value="reject">
<label>Why (required)<textarea name="reason" required></textarea></label><button class="reject" type="submit">Reject</button></form>`;
  } else if (waiting && v.viewOnly) {
    const { why, commands } = v.viewOnly;
    decide = `<h2>Decide</h2>
<p class="who" id="view-only">This link shows the gate but cannot decide it: ${esc(why)}. It ends when the gate closes. Decide where Warden runs: <code>${esc(commands.approve)}</code>, or <code>${esc(commands.reject)}</code>. (With <code>WARDEN_LINK_SECRET</code>, 32 characters or more, set for the worker and the web app, their links decide.)</p>`;
  } else if (waiting) {
    decide = '<p class="muted">Open this page from the link in a notification (or from the inbox of <code>warden serve</code>) to decide.</p>';
  }
  const docs = v.documents.map((d) => `<h2>${esc(d.name)}</h2><pre>${esc(d.text)}</pre>`).join('');
  const pkg = waiting ? pending.package : undefined;
  const facts = waiting && pending.document ? documentFactsHtml(pending.document) : '';
  // On a phone the page is read top to bottom: the figures, the decision, then what backs them.
  return layout(
    `${v.intentId} · ${v.gate}`,
    `${head}${status}${facts}${pkg ? packageSummaryHtml(pkg) : ''}${decide}${v.diff ? diffHtml(v.diff) : ''}${docs}${pkg ? packageDetailsHtml(pkg) : ''}`,
  );
}
