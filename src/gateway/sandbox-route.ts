/**
 * How an agent reaches the gateway. On the host it is a loopback URL. Inside a bubblewrap
 * sandbox there is no host network at all: the gateway's Unix socket is bound into the sandbox
 * and a small forwarder, started first inside it, listens on the sandbox's own loopback and
 * passes each connection to that socket. The agent is the forwarder's child; when it exits the
 * forwarder exits with its status, and the sandbox's pid namespace ends everything else.
 */

/** The loopback port the gateway has inside a sandbox (the sandbox's network is its own: any port is free). */
export const SANDBOX_GATEWAY_PORT = 47100;

/** The forwarder, run with `node -e`: argv is socket path, port, then the agent's command. */
export const FORWARDER_SOURCE = `
const net = require('node:net');
const { spawn } = require('node:child_process');
const [socketPath, port, ...command] = process.argv.slice(1);
const server = net.createServer((client) => {
  const gateway = net.connect(socketPath);
  const close = () => { client.destroy(); gateway.destroy(); };
  client.on('error', close); gateway.on('error', close);
  client.on('close', close); gateway.on('close', close);
  client.pipe(gateway); gateway.pipe(client);
});
server.on('error', (error) => {
  process.stderr.write('warden: the model gateway cannot be reached from the sandbox: ' + error.message + '\\n');
  process.exit(70);
});
server.listen(Number(port), '127.0.0.1', () => {
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
  const forward = (signal) => child.kill(signal);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, forward);
  child.on('error', (error) => { process.stderr.write('warden: ' + error.message + '\\n'); process.exit(127); });
  child.on('exit', (code, signal) => {
    server.close();
    if (signal) { process.removeAllListeners(signal); process.kill(process.pid, signal); }
    else process.exit(code === null ? 1 : code);
  });
});
`;

/** The command that runs `inner` (program and arguments) behind the forwarder. */
export function behindForwarder(nodePath: string, socketPath: string, inner: readonly string[]): string[] {
  return [nodePath, '-e', FORWARDER_SOURCE, '--', socketPath, String(SANDBOX_GATEWAY_PORT), ...inner];
}

/** The gateway's address inside a sandbox. */
export const SANDBOX_GATEWAY_URL = `http://127.0.0.1:${SANDBOX_GATEWAY_PORT}`;

/**
 * The variables an agent finds its model by: the lease's key as every provider's API key, and
 * the gateway as every provider's base URL (OpenAI clients expect `/v1` in it, Anthropic's do not).
 */
export function gatewayEnvironment(gatewayUrl: string, key: string): Record<string, string> {
  const v1 = `${gatewayUrl}/v1`;
  return {
    OPENAI_API_KEY: key,
    OPENAI_BASE_URL: v1,
    // aider (through litellm) reads this spelling.
    OPENAI_API_BASE: v1,
    ANTHROPIC_API_KEY: key,
    ANTHROPIC_BASE_URL: gatewayUrl,
    WARDEN_GATEWAY_URL: gatewayUrl,
    WARDEN_GATEWAY_KEY: key,
  };
}
