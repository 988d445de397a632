/**
 * What differs between a replay and its original by construction — the intent's id, its
 * repository and worktree paths — swapped between the two: a replayed request is matched as the
 * original would have sent it, and a recorded answer (a file path in a tool call, say) is given
 * to the replay's agent as it must be for the replay's worktree.
 */
import type { RecordedAnswer } from '../ledger/exchange-store';
import type { ReplayedAnswer } from './replay-book';

/** [now, then] pairs: the replay's value and the original's. */
export type Substitutions = ReadonlyArray<readonly [string, string]>;

/**
 * `text` with each pair swapped to its `to` side, in every spelling an agent writes it: as is,
 * escaped inside a JSON string, and with every character but letters and digits as a dash
 * (Claude Code names its per-project folder so). One pass, longest first: a path is swapped
 * whole before the id inside it, and nothing swapped in is swapped again.
 */
export function swapped(text: string, substitutions: Substitutions, to: 'then' | 'now'): string {
  const spellings = (value: string): string[] => [value, JSON.stringify(value).slice(1, -1), value.replace(/[^A-Za-z0-9]/g, '-')];
  const map = new Map<string, string>();
  for (const [now, then] of substitutions) {
    if (!now || !then || now === then) continue;
    const [from, into] = to === 'then' ? [now, then] : [then, now];
    spellings(from).forEach((spelling, i) => map.set(spelling, spellings(into)[i]!));
  }
  if (map.size === 0) return text;
  const pattern = new RegExp(
    [...map.keys()]
      .sort((a, b) => b.length - a.length)
      .map((k) => k.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('|'),
    'g',
  );
  return text.replace(pattern, (found) => map.get(found)!);
}

/** A recorded answer as the replay's agent gets it: the original's names put as the replay has them. */
export function answerNow(replayed: ReplayedAnswer, substitutions: Substitutions): ReplayedAnswer {
  if (substitutions.length === 0) return replayed;
  const { answer } = replayed;
  const now: RecordedAnswer =
    answer.kind === 'whole' ? { kind: 'whole', text: swapped(answer.text, substitutions, 'now') } : { kind: 'events', events: joinedDeltas(answer.events).map((event) => swapped(event, substitutions, 'now')) };
  return { ...replayed, answer: now };
}

/**
 * A stream with each run of deltas of one Anthropic content block (its text, or a tool call's
 * JSON) joined into one event, which a client reads as it reads the run: a name the stream split
 * between two deltas is whole again, and can be swapped. Other events pass as they are.
 */
function joinedDeltas(events: readonly string[]): string[] {
  const out: string[] = [];
  let run: { index: number; type: string; field: 'text' | 'partial_json'; value: string } | undefined;
  const flush = (): void => {
    if (!run) return;
    const data = { type: 'content_block_delta', index: run.index, delta: { type: run.type, [run.field]: run.value } };
    out.push(`event: content_block_delta\ndata: ${JSON.stringify(data)}\n\n`);
    run = undefined;
  };
  for (const event of events) {
    const delta = blockDelta(event);
    if (delta && run && run.index === delta.index && run.type === delta.type) {
      run.value += delta.value;
      continue;
    }
    flush();
    if (delta) run = { ...delta };
    else out.push(event);
  }
  flush();
  return out;
}

/** An Anthropic text or tool-input delta event's block, kind and piece; undefined for any other event. */
function blockDelta(event: string): { index: number; type: string; field: 'text' | 'partial_json'; value: string } | undefined {
  const data = /^data: (.*)$/m.exec(event)?.[1];
  if (!data || !data.includes('"content_block_delta"')) return undefined;
  let parsed: { type?: unknown; index?: unknown; delta?: { type?: unknown; text?: unknown; partial_json?: unknown } };
  try {
    parsed = JSON.parse(data) as typeof parsed;
  } catch {
    return undefined;
  }
  if (parsed.type !== 'content_block_delta' || typeof parsed.index !== 'number' || !parsed.delta) return undefined;
  const { delta } = parsed;
  if (delta.type === 'text_delta' && typeof delta.text === 'string') return { index: parsed.index, type: delta.type, field: 'text', value: delta.text };
  if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') return { index: parsed.index, type: delta.type, field: 'partial_json', value: delta.partial_json };
  return undefined;
}
