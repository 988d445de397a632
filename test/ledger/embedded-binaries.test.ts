import { mkdtemp, readFile, readlink, rm, mkdir, writeFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { hydrateLibraryLinks } from '../../src/ledger/embedded-binaries';

describe('hydrateLibraryLinks', () => {
  let pkg: string;
  beforeEach(async () => {
    pkg = await mkdtemp(path.join(tmpdir(), 'warden-pg-pkg-'));
    await mkdir(path.join(pkg, 'native', 'lib'), { recursive: true });
    await writeFile(path.join(pkg, 'native', 'lib', 'libpq.so.5.18'), 'libpq');
    await writeFile(
      path.join(pkg, 'native', 'pg-symlinks.json'),
      JSON.stringify([
        { source: 'native/lib/libpq.so.5.18', target: 'native/lib/libpq.so.5' },
        { source: 'native/lib/libpq.so.5.18', target: 'native/lib/libpq.so' },
      ]),
    );
  });
  afterEach(() => rm(pkg, { recursive: true, force: true }));

  test('makes the listed links that npm left out, relative to their folder, and keeps existing ones', async () => {
    await symlink('elsewhere', path.join(pkg, 'native', 'lib', 'libpq.so'));
    await hydrateLibraryLinks(path.join(pkg, 'native'));
    expect(await readlink(path.join(pkg, 'native', 'lib', 'libpq.so.5'))).toBe('libpq.so.5.18');
    expect(await readFile(path.join(pkg, 'native', 'lib', 'libpq.so.5'), 'utf8')).toBe('libpq');
    expect(await readlink(path.join(pkg, 'native', 'lib', 'libpq.so'))).toBe('elsewhere');
    // A second call (another process, a later start) finds nothing to do.
    await expect(hydrateLibraryLinks(path.join(pkg, 'native'))).resolves.toBeUndefined();
  });

  test('a package without a link list needs nothing', async () => {
    await rm(path.join(pkg, 'native', 'pg-symlinks.json'));
    await expect(hydrateLibraryLinks(path.join(pkg, 'native'))).resolves.toBeUndefined();
  });
});
