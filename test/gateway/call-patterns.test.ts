import {
  DEFAULT_CALL_PATTERN_CONFIG,
  emptyCallPatterns,
  observeCall,
  type AnswerShape,
  type CallFinding,
  type CallObservation,
  type CallPatternConfig,
  type RequestShape,
} from '../../src/gateway/call-patterns';

const request = (hash: string, fields: Partial<RequestShape> = {}): RequestShape => ({ hash, thread: 'main', offersTools: true, turns: 1, ...fields });
const answer = (hash: string, fields: Partial<AnswerShape> = {}): AnswerShape => ({ hash, toolCalls: 1, ...fields });

/** A call of an agent at work: a new request each time, a tool call, a conversation growing slowly. */
function working(i: number, fields: Partial<CallObservation> = {}): CallObservation {
  return { at: i * 2_000, request: request(`req-${i}`, { turns: 1 + 2 * i }), answer: answer(`ans-${i}`, { inputTokens: 10_000 + 500 * i }), ...fields };
}

/** Feeds the calls in order; the findings each one caused, by its index. */
function feed(calls: readonly CallObservation[], config: CallPatternConfig = DEFAULT_CALL_PATTERN_CONFIG): Array<{ index: number; finding: CallFinding }> {
  let state = emptyCallPatterns();
  const out: Array<{ index: number; finding: CallFinding }> = [];
  for (const [index, call] of calls.entries()) {
    const next = observeCall(state, call, config);
    state = next.state;
    out.push(...next.findings.map((finding) => ({ index, finding })));
  }
  return out;
}

const rules = (found: ReturnType<typeof feed>) => found.map((f) => `${f.index}:${f.finding.rule}`);

describe('call patterns: identical request and answer', () => {
  const same = (i: number): CallObservation => ({ at: i * 2_000, request: request('same', { turns: 3 }), answer: answer('same-answer') });

  it('halts at the 4th identical pair, not the 3rd, and reports it once', () => {
    expect(feed([0, 1, 2].map(same))).toEqual([]);
    const found = feed([0, 1, 2, 3, 4, 5].map(same));
    expect(rules(found)).toEqual(['3:identical-loop']);
    expect(found[0]!.finding).toMatchObject({ severity: 'high', halts: true, metadata: { identical: 4 } });
  });

  it('counts the pair within the lease, not only in a row', () => {
    const calls = [same(0), working(1), same(2), working(3), same(4), working(5), same(6)];
    expect(rules(feed(calls))).toEqual(['6:identical-loop']);
  });

  it('stays quiet for polling: the same request with a changing answer', () => {
    const polls = Array.from({ length: 40 }, (_, i) => ({ at: i * 2_000, request: request('poll', { turns: 3, offersTools: false }), answer: answer(`status ${i}`, { toolCalls: 0 }) }));
    expect(feed(polls)).toEqual([]);
  });

  it('takes its threshold from the config', () => {
    expect(rules(feed([0, 1].map(same), { ...DEFAULT_CALL_PATTERN_CONFIG, identicalCalls: 2 }))).toEqual(['1:identical-loop']);
  });
});

describe('call patterns: identical errors', () => {
  const badSchema = (i: number): CallObservation => ({ at: i * 2_000, request: request(`try-${i}`), error: { status: 400, message: 'tools.0.input_schema: invalid' } });

  it('halts at the 4th identical client error in a row, not the 3rd', () => {
    expect(feed([0, 1, 2].map(badSchema))).toEqual([]);
    const found = feed([0, 1, 2, 3].map(badSchema));
    expect(rules(found)).toEqual(['3:error-loop']);
    expect(found[0]!.finding).toMatchObject({ severity: 'high', halts: true, metadata: { status: 400, inRow: 4 } });
  });

  it('restarts the count after an answer or a different error', () => {
    const calls = [badSchema(0), badSchema(1), badSchema(2), working(3), badSchema(4), badSchema(5), badSchema(6)];
    expect(feed(calls)).toEqual([]);
    const other: CallObservation = { at: 0, error: { status: 400, message: 'messages: empty' } };
    expect(feed([badSchema(0), badSchema(1), badSchema(2), other, badSchema(4), badSchema(5), badSchema(6)])).toEqual([]);
  });

  it('stays quiet for a retry after a transient error, and for transient errors in a row', () => {
    expect(feed([{ at: 0, request: request('a'), error: { status: 500, message: 'overloaded' } }, working(1)])).toEqual([]);
    for (const status of [500, 429, 529]) {
      const transient = Array.from({ length: 10 }, (_, i): CallObservation => ({ at: i * 2_000, request: request('a'), error: { status, message: 'slow down' } }));
      expect(feed(transient)).toEqual([]);
    }
  });
});

describe('call patterns: talking to itself', () => {
  const silent = (i: number, fields: Partial<RequestShape> = {}): CallObservation => ({ at: i * 2_000, request: request(`think-${i}`, { turns: 1 + 2 * i, ...fields }), answer: answer(`thought-${i}`, { toolCalls: 0 }) });

  it('records the 8th call in a row that offers tools, calls none and grows the conversation, not the 7th', () => {
    expect(feed(Array.from({ length: 7 }, (_, i) => silent(i)))).toEqual([]);
    const found = feed(Array.from({ length: 8 }, (_, i) => silent(i)));
    expect(rules(found)).toEqual(['7:self-talk']);
    expect(found[0]!.finding).toMatchObject({ severity: 'medium', halts: false });
  });

  it('stays quiet for a long refactor with tool use, and for a conversation without tools', () => {
    expect(feed(Array.from({ length: 60 }, (_, i) => working(i)))).toEqual([]);
    // Plain answers between tool calls do not add up either.
    expect(feed(Array.from({ length: 60 }, (_, i) => (i % 5 === 4 ? working(i) : silent(i))))).toEqual([]);
    expect(feed(Array.from({ length: 20 }, (_, i) => silent(i, { offersTools: false })))).toEqual([]);
  });
});

describe('call patterns: A-B-A-B alternation', () => {
  const step = (i: number, which: string): CallObservation => ({ at: i * 2_000, request: request(`req-${which}`), answer: answer(`ans-${which}`) });

  it('records 3 full cycles, not 2.5', () => {
    expect(feed(['A', 'B', 'A', 'B', 'A'].map((w, i) => step(i, w)))).toEqual([]);
    const found = feed(['A', 'B', 'A', 'B', 'A', 'B'].map((w, i) => step(i, w)));
    expect(rules(found)).toEqual(['5:alternation']);
    expect(found[0]!.finding).toMatchObject({ severity: 'medium', halts: false, metadata: { steps: 6 } });
  });

  it('stays quiet when the pattern breaks, or cycles through three calls', () => {
    expect(feed(['A', 'B', 'A', 'B', 'C', 'B', 'A'].map((w, i) => step(i, w)))).toEqual([]);
    expect(feed(['A', 'B', 'C', 'A', 'B', 'C'].map((w, i) => step(i, w)))).toEqual([]);
  });
});

describe('call patterns: context churn', () => {
  const sized = (i: number, tokens: number, thread = 'main'): CallObservation => ({ at: i * 2_000, request: request(`req-${i}`, { thread, turns: 1 + i }), answer: answer(`ans-${i}`, { inputTokens: tokens }) });

  it('records the 3rd drop of the input by more than half, not the 2nd', () => {
    const tokens = [40_000, 15_000, 40_000, 15_000, 40_000, 15_000];
    expect(feed(tokens.slice(0, 5).map((t, i) => sized(i, t)))).toEqual([]);
    const found = feed(tokens.map((t, i) => sized(i, t)));
    expect(rules(found)).toEqual(['5:context-churn']);
    expect(found[0]!.finding).toMatchObject({ severity: 'medium', halts: false, metadata: { drops: 3, fromTokens: 40_000, toTokens: 15_000 } });
  });

  it('stays quiet for a drop to exactly half, for one compaction, and for small side calls between big ones', () => {
    expect(feed([40_000, 20_000, 40_000, 20_000, 40_000, 20_000].map((t, i) => sized(i, t)))).toEqual([]);
    const compactedOnce = [...Array.from({ length: 20 }, (_, i) => 30_000 + 2_000 * i), 20_000, 22_000, 24_000];
    expect(feed(compactedOnce.map((t, i) => sized(i, t)))).toEqual([]);
    const withSideCalls = Array.from({ length: 12 }, (_, i) => (i % 2 ? sized(i, 400, 'side') : sized(i, 50_000 + 100 * i)));
    expect(feed(withSideCalls)).toEqual([]);
  });
});

describe('call patterns: escalating input', () => {
  const sized = (i: number, tokens: number): CallObservation => ({ at: i * 2_000, request: request(`req-${i}`, { turns: 1 + 2 * i }), answer: answer(`ans-${i}`, { inputTokens: Math.round(tokens) }) });

  it('records 8 strictly rising calls ending at 3× the first, not 7', () => {
    const steep = Array.from({ length: 8 }, (_, i) => 1_000 * 1.2 ** i);
    expect(feed(steep.slice(0, 7).map((t, i) => sized(i, t)))).toEqual([]);
    const found = feed(steep.map((t, i) => sized(i, t)));
    expect(rules(found)).toEqual(['7:cost-escalation']);
    expect(found[0]!.finding).toMatchObject({ severity: 'medium', halts: false, metadata: { calls: 8, firstTokens: 1_000, lastTokens: 3_583 } });
  });

  it('stays quiet for a normal conversation that grows, and for a rise under 3×', () => {
    expect(feed(Array.from({ length: 60 }, (_, i) => sized(i, 8_000 + 1_500 * i)))).toEqual([]);
    expect(feed(Array.from({ length: 8 }, (_, i) => sized(i, 1_000 * 1.15 ** i)))).toEqual([]);
  });
});

describe('call patterns: rapid calls', () => {
  const at = (i: number, ms: number): CallObservation => ({ ...working(i), at: i * ms });

  it('records the 31st call within 10 s, not the 30th', () => {
    expect(feed(Array.from({ length: 30 }, (_, i) => at(i, 300)))).toEqual([]);
    const found = feed(Array.from({ length: 31 }, (_, i) => at(i, 300)));
    expect(rules(found)).toEqual(['30:rapid-calls']);
    expect(found[0]!.finding).toMatchObject({ severity: 'medium', halts: false, metadata: { calls: 31, spanMs: 9_000 } });
  });

  it('judges by start time when calls end out of order', () => {
    const calls = Array.from({ length: 31 }, (_, i) => at(i, 300)).reverse();
    expect(rules(feed(calls))).toEqual(['30:rapid-calls']);
  });

  it('stays quiet for a busy agent a little slower than that', () => {
    expect(feed(Array.from({ length: 200 }, (_, i) => at(i, 400)))).toEqual([]);
  });
});

describe('call patterns: state', () => {
  it('leaves the state it was given unchanged', () => {
    const before = emptyCallPatterns();
    const { state } = observeCall(before, working(0));
    expect(before.pairs.size).toBe(0);
    expect(before.times).toEqual([]);
    expect(state.pairs.size).toBe(1);
  });
});
