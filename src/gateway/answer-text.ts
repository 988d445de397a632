/**
 * The text of a recorded answer, as the agent read it: a whole body or a stream's events, in any
 * of the three APIs the gateway speaks. A recording does not say which API a call used: the
 * answer's shape does (Chat has `choices`, Responses `output` or `response.*` events, Messages
 * `content` or `message_*` events).
 */
import type { RecordedAnswer } from '../ledger/exchange-store';
import { readAnswer, SseSplitter, SseUsageReader, type Dialect, type SseEvent } from './wire';

export function recordedAnswerText(answer: RecordedAnswer): string {
  if (answer.kind === 'whole') {
    const dialect = wholeDialect(answer.text);
    return dialect ? readAnswer(dialect, answer.text).text : '';
  }
  const events = new SseSplitter().push(Buffer.from(answer.events.map(terminated).join('')));
  const dialect = streamDialect(events);
  if (!dialect) return '';
  const reader = new SseUsageReader(dialect);
  for (const event of events) reader.read(event);
  return reader.text;
}

/** A recorded stream's last event may be one cut before its blank line: it is read all the same. */
const terminated = (raw: string): string => (/\r?\n\r?\n$/.test(raw) ? raw : `${raw}\n\n`);

function wholeDialect(text: string): Dialect | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!body || typeof body !== 'object') return undefined;
  const record = body as Record<string, unknown>;
  if (Array.isArray(record.choices)) return 'chat';
  if (Array.isArray(record.output)) return 'responses';
  if (Array.isArray(record.content)) return 'messages';
  return undefined;
}

function streamDialect(events: readonly SseEvent[]): Dialect | undefined {
  for (const event of events) {
    let data: unknown;
    try {
      data = JSON.parse(event.data);
    } catch {
      continue;
    }
    if (!data || typeof data !== 'object') continue;
    const record = data as Record<string, unknown>;
    const type = typeof record.type === 'string' ? record.type : (event.event ?? '');
    if (type.startsWith('response.')) return 'responses';
    if (type.startsWith('message_') || type.startsWith('content_block_')) return 'messages';
    if (Array.isArray(record.choices)) return 'chat';
  }
  return undefined;
}
