import { blockingUsernsSettings, describeUnready } from '../../src/runtime/sandbox-readiness';

const settings = (values: Record<string, string>) => (file: string) => values[file];

test('missing bubblewrap: the fix names the package, and `warden doctor --fix` where this process may install', () => {
  const missing = { available: false, reason: 'bwrap is not installed (no bwrap on PATH)' };
  const asRoot = describeUnready(missing, [], true);
  expect(asRoot).toMatchObject({ ready: false, problem: 'bubblewrap is not installed' });
  expect(asRoot.fix).toMatch(/apt-get install bubblewrap/);
  expect(asRoot.fix).toMatch(/warden doctor --fix/);
  const asUser = describeUnready(missing, [], false);
  expect(asUser.fix).toMatch(/sudo apt-get install bubblewrap.*sudo dnf install bubblewrap/);
  expect(asUser.fix).not.toMatch(/doctor --fix/);
});

test('bubblewrap that cannot make its namespaces: the fix names the kernel setting that forbids them', () => {
  const blocked = blockingUsernsSettings(settings({ '/proc/sys/kernel/apparmor_restrict_unprivileged_userns': '1', '/proc/sys/user/max_user_namespaces': '15000' }));
  expect(blocked).toEqual([{ sysctl: 'kernel.apparmor_restrict_unprivileged_userns', value: '1', fix: 'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' }]);
  const unready = describeUnready({ available: false, bwrapPath: '/usr/bin/bwrap', reason: '/usr/bin/bwrap exited with 1: setting up uid map: Permission denied' }, blocked);
  expect(unready.problem).toMatch(/bubblewrap cannot run here \(.*Permission denied\)/);
  expect(unready.fix).toMatch(/kernel\.apparmor_restrict_unprivileged_userns = 1.*`sudo sysctl -w kernel\.apparmor_restrict_unprivileged_userns=0`/);
  expect(blockingUsernsSettings(settings({ '/proc/sys/kernel/unprivileged_userns_clone': '0', '/proc/sys/user/max_user_namespaces': '0' })).map((s) => s.sysctl)).toEqual([
    'kernel.unprivileged_userns_clone',
    'user.max_user_namespaces',
  ]);
});

test('no kernel setting to blame: the fix speaks of containers', () => {
  const unready = describeUnready({ available: false, bwrapPath: '/usr/bin/bwrap', reason: 'Operation not permitted' }, []);
  expect(unready.fix).toMatch(/container/);
});
