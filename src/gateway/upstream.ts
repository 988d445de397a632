import type { HttpAgentProfile } from '../shared/agent-profiles';
import { parseDuration } from '../shared/duration';

/** Where each provider is when a profile names no `baseUrl`, and where its keys are by default. */
export const PROVIDER_DEFAULTS = {
  anthropic: { baseUrl: 'https://api.anthropic.com', keys: ['ANTHROPIC_API_KEY'] },
  openai: { baseUrl: 'https://api.openai.com/v1', keys: ['OPENAI_API_KEY'] },
} as const;

/** What an endpoint's address depends on. */
export type EndpointRef = Pick<HttpAgentProfile, 'kind' | 'baseUrl'>;

/**
 * The endpoint's base URL the way its provider's SDK takes it: OpenAI's ends in `/v1` (requests
 * go to `<base>/responses`, `<base>/chat/completions`), Anthropic's does not (`<base>/v1/messages`).
 * Either form is accepted: an OpenAI URL with no path gets `/v1`, an Anthropic one ending in
 * `/v1` loses it. Any other path (a proxy's, Azure's) is kept as given.
 */
export function baseUrlOf(profile: EndpointRef): string {
  const url = (profile.baseUrl ?? PROVIDER_DEFAULTS[profile.kind].baseUrl).replace(/\/+$/, '');
  if (profile.kind === 'anthropic') return url.replace(/\/v1$/, '');
  return new URL(url).pathname === '/' ? `${url}/v1` : url;
}

/** Whether the endpoint is on this machine (allowed in development mode; keys optional). */
export function isLocalEndpoint(profile: EndpointRef): boolean {
  const host = new URL(baseUrlOf(profile)).hostname;
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\./.test(host);
}

/** The model behind an agent: where the gateway forwards its calls and what it may ask for. */
export interface UpstreamModel {
  readonly kind: 'anthropic' | 'openai';
  readonly baseUrl: string;
  /** Names of the worker's environment variables holding the real keys, tried in order. */
  readonly apiKeyEnv: readonly string[];
  /** The models a call may name: the profile's and its aliases. */
  readonly models: readonly string[];
  /** The most output tokens one call may ask for (a larger or missing cap is lowered to it). */
  readonly maxTokens: number;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
}

/** The upstream an HTTP model profile describes. */
export function upstreamOf(profile: HttpAgentProfile): UpstreamModel {
  return {
    kind: profile.kind,
    baseUrl: baseUrlOf(profile),
    apiKeyEnv: profile.apiKeyEnv ?? [...PROVIDER_DEFAULTS[profile.kind].keys],
    models: [profile.model, ...profile.modelAliases],
    maxTokens: profile.maxTokens,
    timeoutMs: parseDuration(profile.timeout),
    maxResponseBytes: profile.maxResponseBytes,
  };
}

/** Whether `model` is one of `names` (a dated name, `model-2025…`, counts as its base). */
export function modelNamed(names: readonly string[], model: string): boolean {
  return names.some((name) => model === name || model.startsWith(`${name}-20`));
}
