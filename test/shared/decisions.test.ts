import { z } from 'zod';
import { parseDecision } from '../../src/shared/decisions';
import { GateKindSchema } from '../../src/shared/schema-primitives';
import { CUSTOM_GATE_ID } from '../../src/shared/gates';

/**
 * The zod schema parseDecision replaced (workflow code no longer loads zod). Workflow histories
 * recorded with it must replay the same way, so parseDecision must accept and produce exactly
 * what it did.
 */
const FormerDecisionSchema = z
  .object({
    // custom gates' ids were added since: any name of their shape
    gate: z.union([GateKindSchema, z.string().regex(CUSTOM_GATE_ID)]),
    decision: z.enum(['approve', 'reject', 'approve-with-conditions', 'defer']),
    by: z.string().trim().min(1),
    reason: z.string().trim().max(2000).optional(),
    conditions: z.array(z.string().trim().min(1).max(1000)).max(20).optional(),
    agentSession: z.string().max(200).optional(),
  })
  .refine((d) => d.decision !== 'reject' || (d.reason !== undefined && d.reason.length > 0))
  .refine((d) => d.decision !== 'approve-with-conditions' || (d.conditions?.length ?? 0) > 0);

const PAYLOADS: unknown[] = [
  { gate: 'merge', decision: 'approve', by: 'ana' },
  { gate: 'merge', decision: 'approve', by: '  ana  ', reason: '  fine  ', extra: 'dropped' },
  { gate: 'merge', decision: 'approve', by: '   ' },
  { gate: 'merge', decision: 'approve' },
  { gate: 'merge', decision: 'approve', by: 7 },
  { gate: 'lunch', decision: 'approve', by: 'ana' },
  { gate: 'Lunch break!', decision: 'approve', by: 'ana' },
  { gate: 'merge', decision: 'maybe', by: 'ana' },
  { gate: 'merge', decision: 'reject', by: 'ana' },
  { gate: 'merge', decision: 'reject', by: 'ana', reason: '   ' },
  { gate: 'merge', decision: 'reject', by: 'ana', reason: 'no tests' },
  { gate: 'merge', decision: 'reject', by: 'ana', reason: 'x'.repeat(2001) },
  { gate: 'merge', decision: 'reject', by: 'ana', reason: ` ${'x'.repeat(2000)} ` },
  { gate: 'merge', decision: 'reject', by: 'ana', reason: null },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana' },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: [] },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: [' keep the API '] },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: ['  '] },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: [3] },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: 'keep the API' },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: Array.from({ length: 21 }, () => 'c') },
  { gate: 'lld', decision: 'approve-with-conditions', by: 'ana', conditions: ['y'.repeat(1001)] },
  { gate: 'merge', decision: 'defer', by: 'ana', agentSession: ' s1 ' },
  { gate: 'merge', decision: 'approve', by: 'ana', agentSession: 's'.repeat(201) },
  { gate: 'merge', decision: 'approve', by: 'ana', reason: undefined },
  null,
  'approve',
  [{ gate: 'merge', decision: 'approve', by: 'ana' }],
  {},
];

test.each(PAYLOADS.map((payload, i) => [i, payload]))('payload %i: accepted and shaped exactly as the former zod schema did', (_, payload) => {
  const former = FormerDecisionSchema.safeParse(payload);
  const parsed = parseDecision(payload);
  expect(parsed.ok).toBe(former.success);
  if (parsed.ok && former.success) expect(JSON.parse(JSON.stringify(parsed.decision))).toEqual(JSON.parse(JSON.stringify(former.data)));
});

test('problems name the field and say what is wrong', () => {
  expect(parseDecision({ gate: 'merge', decision: 'reject', by: 'ana' })).toEqual({ ok: false, problems: 'reason: a rejection needs a reason' });
  expect(parseDecision({ gate: 'lld', decision: 'approve-with-conditions', by: 'ana' })).toEqual({
    ok: false,
    problems: 'conditions: approve-with-conditions needs at least one condition',
  });
  const bad = parseDecision({ gate: 'Lunch break!', decision: 'approve', by: ' ' });
  expect(bad.ok).toBe(false);
  expect(!bad.ok && bad.problems).toMatch(/^gate: expected one of architecture, .*merge, or a custom gate's id; by: a decision must say who made it$/);
  expect(parseDecision(null)).toEqual({ ok: false, problems: 'a decision must be an object' });
});
