import { errorShape, requestShape, StreamedAnswerShape, wholeAnswerShape } from '../../src/gateway/call-shape';
import { SseSplitter } from '../../src/gateway/wire';

const tools = [{ name: 'edit', input_schema: { type: 'object', properties: { id: { type: 'string' } } } }];
const conversation = [
  { role: 'user', content: 'fix the bug' },
  { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'edit', input: { id: 'a.ts' } }] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'done', cache_control: { type: 'ephemeral' } }] },
];
const base = { model: 'claude-test', system: 'You are an agent.', tools, messages: conversation, max_tokens: 1000 };

describe('requestShape', () => {
  it('hashes what is asked, not stream flags, metadata or ids', () => {
    const again = {
      ...base,
      stream: true,
      metadata: { user_id: 'session-2' },
      messages: conversation.map((m) => (Array.isArray(m.content) ? { ...m, content: m.content.map((b) => ({ ...b, ...('id' in b ? { id: 'toolu_9' } : { tool_use_id: 'toolu_9' }) })) } : m)),
    };
    expect(requestShape('messages', again).hash).toBe(requestShape('messages', base).hash);
  });

  it('tells apart a different conversation, and a different tool argument named id', () => {
    const edited = { ...base, messages: [conversation[0], { ...conversation[1], content: [{ type: 'tool_use', id: 'toolu_1', name: 'edit', input: { id: 'b.ts' } }] }, conversation[2]] };
    expect(requestShape('messages', edited).hash).not.toBe(requestShape('messages', base).hash);
    expect(requestShape('messages', { ...base, messages: conversation.slice(0, 1) }).hash).not.toBe(requestShape('messages', base).hash);
  });

  it('keeps one thread while the conversation grows, and counts its turns and tools', () => {
    const first = requestShape('messages', { ...base, messages: conversation.slice(0, 1) });
    const later = requestShape('messages', base);
    expect(later.thread).toBe(first.thread);
    expect([first.turns, later.turns]).toEqual([1, 3]);
    expect(later.offersTools).toBe(true);
    const side = requestShape('messages', { model: 'claude-test', system: 'Write a title.', messages: conversation.slice(0, 1) });
    expect(side.thread).not.toBe(first.thread);
    expect(side.offersTools).toBe(false);
    expect(requestShape('responses', { model: 'gpt-test', instructions: 'x', input: 'hello' }).turns).toBe(1);
  });
});

/** An answer streamed as server-sent events, split into the reader's events. */
function streamed(dialect: 'chat' | 'messages' | 'responses', events: unknown[]) {
  const reader = new StreamedAnswerShape(dialect);
  const text = events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('');
  for (const event of new SseSplitter().push(Buffer.from(text))) reader.read(event);
  return reader.shape(100);
}

describe('answer shapes', () => {
  const chatCall = (args: string) => JSON.stringify({ id: 'chatcmpl-1', created: 1, choices: [{ message: { content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: args } }] } }], usage: { prompt_tokens: 100 } });

  it('hashes text and tool calls, not ids, and tells apart different tool arguments', () => {
    const a = wholeAnswerShape('chat', chatCall('{"path":"a.ts"}'), 100);
    expect(a).toMatchObject({ toolCalls: 1, inputTokens: 100 });
    expect(wholeAnswerShape('chat', chatCall('{"path":"a.ts"}').replace('call_1', 'call_2').replace('"created":1', '"created":2'), 100).hash).toBe(a.hash);
    expect(wholeAnswerShape('chat', chatCall('{"path":"b.ts"}'), 100).hash).not.toBe(a.hash);
  });

  it('reads a streamed answer to the same shape as the whole one', () => {
    const whole = wholeAnswerShape('chat', chatCall('{"path":"a.ts"}'), 100);
    const chat = streamed('chat', [
      { id: 'x', choices: [{ delta: { role: 'assistant', content: null } }] },
      { id: 'x', choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_7', function: { name: 'read', arguments: '{"path":' } }] } }] },
      { id: 'x', choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '"a.ts"}' } }] } }] },
    ]);
    expect(chat).toEqual(whole);

    const message = JSON.stringify({ id: 'msg_1', content: [{ type: 'text', text: 'Reading.' }, { type: 'tool_use', id: 'toolu_1', name: 'read', input: { path: 'a.ts' } }] });
    const anthropic = streamed('messages', [
      { type: 'message_start', message: { id: 'msg_2' } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Reading.' } },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_2', name: 'read', input: {} } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"path": "a.ts"}' } },
    ]);
    expect(anthropic).toEqual(wholeAnswerShape('messages', message, 100));
    expect(anthropic.toolCalls).toBe(1);

    const item = { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'read', arguments: '{"path":"a.ts"}', status: 'completed' };
    const responses = streamed('responses', [{ type: 'response.output_item.done', output_index: 0, item }]);
    expect(responses).toEqual(wholeAnswerShape('responses', JSON.stringify({ output: [{ ...item, id: 'fc_2' }] }), 100));
  });
});

describe('errorShape', () => {
  it('takes the provider’s message and masks request ids', () => {
    const one = errorShape(400, JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'tools.0: bad schema (request req_011CabcDEF)' } }));
    const two = errorShape(400, JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'tools.0: bad schema (request req_022Cxyz)' } }));
    expect(one).toEqual({ status: 400, message: 'tools.0: bad schema (request req_#)' });
    expect(two).toEqual(one);
    expect(errorShape(404, 'not found')).toEqual({ status: 404, message: 'not found' });
  });
});
