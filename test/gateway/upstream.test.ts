import { baseUrlOf, isLocalEndpoint } from '../../src/gateway/upstream';

/** Base URLs as each provider's SDK takes them, whichever form a profile or --model-url gives. */

test.each([
  // OpenAI's SDK: the base URL includes /v1; a URL without a path gets it.
  ['openai', undefined, 'https://api.openai.com/v1'],
  ['openai', 'http://127.0.0.1:8080', 'http://127.0.0.1:8080/v1'],
  ['openai', 'http://127.0.0.1:8080/', 'http://127.0.0.1:8080/v1'],
  ['openai', 'http://127.0.0.1:8080/v1', 'http://127.0.0.1:8080/v1'],
  ['openai', 'http://127.0.0.1:8080/v1/', 'http://127.0.0.1:8080/v1'],
  // Another path is the endpoint's own (a proxy, Azure): kept as given.
  ['openai', 'https://proxy.example/openai', 'https://proxy.example/openai'],
  ['openai', 'https://example.openai.azure.com/openai/v1', 'https://example.openai.azure.com/openai/v1'],
  // Anthropic's SDK: the base URL has no /v1 (requests go to <base>/v1/messages); a trailing one is taken off.
  ['anthropic', undefined, 'https://api.anthropic.com'],
  ['anthropic', 'http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
  ['anthropic', 'http://127.0.0.1:8080/v1', 'http://127.0.0.1:8080'],
  ['anthropic', 'http://127.0.0.1:8080/v1/', 'http://127.0.0.1:8080'],
  ['anthropic', 'https://proxy.example/anthropic/v1', 'https://proxy.example/anthropic'],
  ['anthropic', 'https://proxy.example/v1beta', 'https://proxy.example/v1beta'],
] as const)('%s %s → %s', (kind, baseUrl, expected) => {
  expect(baseUrlOf({ kind, ...(baseUrl === undefined ? {} : { baseUrl }) })).toBe(expected);
});

test('a local endpoint is local in either form', () => {
  expect(isLocalEndpoint({ kind: 'openai', baseUrl: 'http://localhost:11434' })).toBe(true);
  expect(isLocalEndpoint({ kind: 'anthropic', baseUrl: 'http://127.0.0.1:9/v1' })).toBe(true);
  expect(isLocalEndpoint({ kind: 'openai' })).toBe(false);
});
