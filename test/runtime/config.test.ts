import { loadRuntimeConfig } from '../../src/runtime/config';

test("the Warden home is the user's ~/.warden wherever a command runs, and WARDEN_HOME moves it", () => {
  for (const cwd of ['/work/project', '/tmp/elsewhere']) {
    const config = loadRuntimeConfig({ HOME: '/home/ada' }, cwd);
    expect(config.wardenHome).toBe('/home/ada/.warden');
    expect(config.worktreeRoot).toBe('/home/ada/.warden/worktrees');
    expect(config.postgresDataDir).toBe('/home/ada/.warden/postgres');
  }
  expect(loadRuntimeConfig({ HOME: '/home/ada', WARDEN_HOME: 'state' }, '/work/project').wardenHome).toBe('/work/project/state');
  expect(loadRuntimeConfig({ HOME: '/home/ada', WARDEN_HOME: '' }, '/work/project').wardenHome).toBe('/home/ada/.warden');
});

test('the log format is human unless WARDEN_LOG_FORMAT says json; anything else is refused', () => {
  expect(loadRuntimeConfig({ HOME: '/h' }).logFormat).toBe('human');
  expect(loadRuntimeConfig({ HOME: '/h', WARDEN_LOG_FORMAT: 'json' }).logFormat).toBe('json');
  expect(() => loadRuntimeConfig({ HOME: '/h', WARDEN_LOG_FORMAT: 'xml' })).toThrow('WARDEN_LOG_FORMAT must be human or json, not "xml"');
});
