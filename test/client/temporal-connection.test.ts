import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadRuntimeConfig } from '../../src/runtime/config';
import { connectionOptions } from '../../src/runtime/temporal';

/** The connection options the SDK gets for an environment, as `temporal` would read it. */
async function optionsFor(env: NodeJS.ProcessEnv) {
  return connectionOptions(loadRuntimeConfig(env, '/work'));
}

const dir = mkdtempSync(path.join(tmpdir(), 'warden-tls-'));
const pem = (name: string): string => {
  const file = path.join(dir, name);
  writeFileSync(file, `-----BEGIN ${name}-----\n`);
  return file;
};
const cert = pem('client.crt');
const key = pem('client.key');
const ca = pem('ca.crt');

describe('the Temporal CLI variables map onto the SDK connection options', () => {
  test('address and namespace', () => {
    const config = loadRuntimeConfig({ TEMPORAL_ADDRESS: 'temporal.example.com:7233', TEMPORAL_NAMESPACE: 'team' });
    expect(config).toMatchObject({ temporalAddress: 'temporal.example.com:7233', namespace: 'team' });
    expect(loadRuntimeConfig({}).namespace).toBe('default');
  });

  test('nothing set: a plain connection', async () => {
    expect(await optionsFor({})).toEqual({ tls: false, apiKey: undefined });
  });

  test('an API key turns TLS on, with no client certificate', async () => {
    expect(await optionsFor({ TEMPORAL_API_KEY: 'k' })).toEqual({ tls: {}, apiKey: 'k' });
  });

  test('TEMPORAL_TLS=false turns TLS off even with an API key', async () => {
    expect(await optionsFor({ TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: 'false' })).toEqual({ tls: false, apiKey: 'k' });
    expect(await optionsFor({ TEMPORAL_API_KEY: 'k', TEMPORAL_TLS: '0' })).toEqual({ tls: false, apiKey: 'k' });
  });

  test('TEMPORAL_TLS=true alone: TLS with the system CAs', async () => {
    expect(await optionsFor({ TEMPORAL_TLS: 'true' })).toEqual({ tls: {}, apiKey: undefined });
  });

  test('mTLS from files: client pair, server CA, server name', async () => {
    const options = await optionsFor({
      TEMPORAL_TLS_CLIENT_CERT_PATH: cert,
      TEMPORAL_TLS_CLIENT_KEY_PATH: key,
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca,
      TEMPORAL_TLS_SERVER_NAME: 'frontend.internal',
    });
    expect(options.tls).toEqual({
      serverNameOverride: 'frontend.internal',
      serverRootCACertificate: Buffer.from('-----BEGIN ca.crt-----\n'),
      clientCertPair: { crt: Buffer.from('-----BEGIN client.crt-----\n'), key: Buffer.from('-----BEGIN client.key-----\n') },
    });
  });

  test('mTLS from inline data', async () => {
    const options = await optionsFor({ TEMPORAL_TLS_CLIENT_CERT_DATA: 'CERT', TEMPORAL_TLS_CLIENT_KEY_DATA: 'KEY', TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'CA' });
    expect(options.tls).toEqual({ serverRootCACertificate: Buffer.from('CA'), clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') } });
  });

  test('a relative path is taken from the working folder', () => {
    const config = loadRuntimeConfig({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: 'certs/ca.pem' }, '/work');
    expect(config.tls?.serverCaCert).toEqual({ path: '/work/certs/ca.pem', variable: 'TEMPORAL_TLS_SERVER_CA_CERT_PATH' });
  });

  test('TEMPORAL_TLS_DISABLE_HOST_VERIFICATION=false is fine', async () => {
    expect(await optionsFor({ TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'false' })).toEqual({ tls: false, apiKey: undefined });
  });
});

describe('bad combinations are one clear error', () => {
  const cases: [string, NodeJS.ProcessEnv, RegExp][] = [
    ['a certificate without a key', { TEMPORAL_TLS_CLIENT_CERT_PATH: cert }, /TEMPORAL_TLS_CLIENT_CERT_PATH is set but no client key: set TEMPORAL_TLS_CLIENT_KEY_PATH/],
    ['a key without a certificate', { TEMPORAL_TLS_CLIENT_KEY_DATA: 'KEY' }, /TEMPORAL_TLS_CLIENT_KEY_DATA is set but no client certificate/],
    ['both the path and the data', { TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca, TEMPORAL_TLS_SERVER_CA_CERT_DATA: 'CA' }, /set TEMPORAL_TLS_SERVER_CA_CERT_PATH or TEMPORAL_TLS_SERVER_CA_CERT_DATA, not both/],
    ['TLS off with TLS options', { TEMPORAL_TLS: 'false', TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca }, /TEMPORAL_TLS=false contradicts TEMPORAL_TLS_SERVER_CA_CERT_PATH/],
    ['TEMPORAL_TLS not a boolean', { TEMPORAL_TLS: 'yes please' }, /TEMPORAL_TLS must be true or false/],
    ['host verification off', { TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'true' }, /not supported .*set TEMPORAL_TLS_SERVER_NAME/],
    ["the Web UI's variable names", { TEMPORAL_TLS_CERT: cert }, /TEMPORAL_TLS_CERT is not a Temporal CLI variable; set TEMPORAL_TLS_CLIENT_CERT_PATH/],
  ];
  test.each(cases)('%s', (_name, env, message) => {
    expect(() => loadRuntimeConfig(env)).toThrow(message);
  });

  test('a PEM file that cannot be read names its variable', async () => {
    await expect(optionsFor({ TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(dir, 'missing.crt'), TEMPORAL_TLS_CLIENT_KEY_PATH: key })).rejects.toThrow(
      /cannot read TEMPORAL_TLS_CLIENT_CERT_PATH \(.*missing\.crt\): ENOENT/,
    );
  });
});
