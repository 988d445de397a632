import { ForgeError } from '../../src/forge/forge-client';
import { forgeRepositoryFromRemote } from '../../src/forge/remote';

describe('forgeRepositoryFromRemote', () => {
  it('reads an https remote, with or without .git, credentials and a port', () => {
    expect(forgeRepositoryFromRemote('https://gitea.example.com/team/service.git', { kind: 'gitea' })).toEqual({ kind: 'gitea', webUrl: 'https://gitea.example.com', path: 'team/service' });
    expect(forgeRepositoryFromRemote('http://bot:0123abcd@127.0.0.1:3300/team/service', { kind: 'gitea' })).toEqual({ kind: 'gitea', webUrl: 'http://127.0.0.1:3300', path: 'team/service' });
    expect(forgeRepositoryFromRemote('https://gitea.example.com/team/service.git/', { kind: 'gitea' }).path).toBe('team/service');
  });

  it('knows github.com and gitlab.com without a kind', () => {
    expect(forgeRepositoryFromRemote('git@github.com:octo/app.git')).toEqual({ kind: 'github', webUrl: 'https://github.com', path: 'octo/app' });
    expect(forgeRepositoryFromRemote('https://gitlab.com/group/sub/app.git')).toEqual({ kind: 'gitlab', webUrl: 'https://gitlab.com', path: 'group/sub/app' });
  });

  it('takes the web address from the settings for ssh remotes of a self-hosted forge', () => {
    expect(forgeRepositoryFromRemote('git@gitea.example.com:team/service.git', { kind: 'gitea', webUrl: 'https://gitea.example.com/' })).toEqual({ kind: 'gitea', webUrl: 'https://gitea.example.com', path: 'team/service' });
    expect(forgeRepositoryFromRemote('ssh://git@gitea.example.com:2222/team/service.git', { kind: 'gitea', webUrl: 'https://code.example.com' })).toEqual({ kind: 'gitea', webUrl: 'https://code.example.com', path: 'team/service' });
  });

  it('refuses an ssh remote of a self-hosted forge with no web address, saying what to set', () => {
    expect(() => forgeRepositoryFromRemote('git@gitea.example.com:team/service.git', { kind: 'gitea' })).toThrow(/over SSH.*set it \(e\.g\. https:\/\/gitea\.example\.com\)/);
  });

  it('strips the path a forge is served under', () => {
    expect(forgeRepositoryFromRemote('https://example.com/git/team/service.git', { kind: 'gitea', webUrl: 'https://example.com/git' })).toEqual({ kind: 'gitea', webUrl: 'https://example.com/git', path: 'team/service' });
  });

  it('refuses a path that is not owner/name on Gitea and GitHub, and keeps GitLab groups', () => {
    expect(() => forgeRepositoryFromRemote('https://gitea.example.com/team/sub/service.git', { kind: 'gitea' })).toThrow(/owner\/name/);
    expect(() => forgeRepositoryFromRemote('https://github.com/octo', {})).toThrow(/owner\/name/);
    expect(forgeRepositoryFromRemote('git@gitlab.example.com:a/b/c/d.git', { kind: 'gitlab', webUrl: 'https://gitlab.example.com' }).path).toBe('a/b/c/d');
  });

  it('refuses an unknown host without a kind, a local path, and a bad web address, as invalid', () => {
    const invalid = (run: () => unknown, message: RegExp): void => {
      try {
        run();
      } catch (error) {
        expect(error).toBeInstanceOf(ForgeError);
        expect((error as ForgeError).kind).toBe('invalid');
        expect((error as ForgeError).message).toMatch(message);
        return;
      }
      throw new Error('expected a ForgeError');
    };
    invalid(() => forgeRepositoryFromRemote('https://gitea.example.com/team/service.git'), /cannot tell which forge gitea\.example\.com is/);
    invalid(() => forgeRepositoryFromRemote('/srv/git/service.git', { kind: 'gitea' }), /not a git remote address/);
    invalid(() => forgeRepositoryFromRemote('file:///srv/git/team/service.git', { kind: 'gitea' }), /uses file/);
    invalid(() => forgeRepositoryFromRemote('https://gitea.example.com/team/service.git', { kind: 'gitea', webUrl: 'gitea.example.com' }), /is not a URL/);
  });

  it('never repeats the token of an http remote in its messages', () => {
    expect(() => forgeRepositoryFromRemote('https://bot:s3cret-token@gitea.example.com/service.git', { kind: 'gitea' })).toThrow(/^(?!.*s3cret-token)/);
  });
});
