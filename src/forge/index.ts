import type { ForgeKind } from '../shared/forge';
import type { ForgeClient, ForgeRepository } from './forge-client';
import { GiteaClient } from './gitea';
import { GitHubClient } from './github';
import { GitLabClient } from './gitlab';

export type { ForgeClient, ForgeRepository, OpenPullRequest } from './forge-client';
export { ForgeError, type ForgeErrorKind } from './forge-client';

/** Makes the adapter for one forge kind. */
export type ForgeAdapter = (repository: ForgeRepository, token: string) => ForgeClient;

/** The adapter for each kind. */
export const FORGE_ADAPTERS: Readonly<Record<ForgeKind, ForgeAdapter>> = {
  gitea: (repository, token) => new GiteaClient(repository, token),
  github: (repository, token) => new GitHubClient(repository, token),
  gitlab: (repository, token) => new GitLabClient(repository, token),
};

/** The ForgeClient for the repository's forge, acting with `token`. */
export function forgeClient(repository: ForgeRepository, token: string, adapters: Readonly<Record<ForgeKind, ForgeAdapter>> = FORGE_ADAPTERS): ForgeClient {
  return adapters[repository.kind](repository, token);
}
