import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * A GitLab webhook delivery, checked and read: GitLab signs nothing, it sends the hook's secret
 * token back in `X-Gitlab-Token`, so the check is that header against the secret (compared in
 * constant time). What Warden reads is which merge request the event is about.
 */

/** The events Warden reads, by GitLab's `object_kind`. */
export type GitLabWebhookEvent = 'merge_request' | 'note' | 'pipeline';

export type GitLabWebhook = { readonly event: GitLabWebhookEvent; readonly pullRequest?: number; readonly headBranch?: string } | { readonly refused: string };

const EVENTS: Readonly<Record<string, GitLabWebhookEvent>> = {
  'Merge Request Hook': 'merge_request',
  'Note Hook': 'note',
  'Pipeline Hook': 'pipeline',
};

export function readGitLabWebhook(headers: Readonly<Record<string, string | readonly string[] | undefined>>, rawBody: string | Buffer, secret: string): GitLabWebhook {
  // An empty secret would let anyone who sends an empty header in.
  if (secret === '') return { refused: 'no webhook secret is configured' };
  const token = header(headers, 'x-gitlab-token');
  if (token === undefined) return { refused: 'no X-Gitlab-Token header' };
  if (!sameSecret(token, secret)) return { refused: 'X-Gitlab-Token does not match the secret' };
  const name = header(headers, 'x-gitlab-event');
  const event = name === undefined ? undefined : EVENTS[name];
  if (event === undefined) return { refused: `not an event Warden reads (${name === undefined ? 'no X-Gitlab-Event header' : JSON.stringify(name.slice(0, 60))})` };
  let body: unknown;
  try {
    body = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
  } catch {
    return { refused: 'the body is not JSON' };
  }
  if (!isRecord(body)) return { refused: 'the body is not a JSON object' };
  const attributes = isRecord(body.object_attributes) ? body.object_attributes : {};
  switch (event) {
    case 'merge_request':
      return withMergeRequest(event, attributes.iid, attributes.source_branch);
    case 'note': {
      // A note on an issue, commit or snippet is about no merge request.
      const mergeRequest = isRecord(body.merge_request) ? body.merge_request : undefined;
      if (attributes.noteable_type !== 'MergeRequest' || mergeRequest === undefined) return { event };
      return withMergeRequest(event, mergeRequest.iid, mergeRequest.source_branch);
    }
    case 'pipeline': {
      const mergeRequest = isRecord(body.merge_request) ? body.merge_request : undefined;
      if (mergeRequest !== undefined) return withMergeRequest(event, mergeRequest.iid, mergeRequest.source_branch);
      // A branch pipeline: its ref is the branch (a tag's is not).
      return attributes.tag !== true && typeof attributes.ref === 'string' ? { event, headBranch: attributes.ref } : { event };
    }
  }
}

function withMergeRequest(event: GitLabWebhookEvent, iid: unknown, sourceBranch: unknown): GitLabWebhook {
  return {
    event,
    ...(typeof iid === 'number' && Number.isSafeInteger(iid) && iid > 0 ? { pullRequest: iid } : {}),
    ...(typeof sourceBranch === 'string' && sourceBranch !== '' ? { headBranch: sourceBranch } : {}),
  };
}

/** Equal in constant time: both sides hashed first, so that neither length nor content leaks. */
function sameSecret(given: string, secret: string): boolean {
  const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(secret));
}

function header(headers: Readonly<Record<string, string | readonly string[] | undefined>>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue;
    // A header sent twice is ambiguous: take none rather than guess which one GitLab meant.
    if (Array.isArray(value)) return value.length === 1 ? (value[0] as string) : undefined;
    return value as string | undefined;
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
