/** Planted credentials of each issuer's documented shape (made up, of course). */
export const PLANTED: ReadonlyArray<readonly [string, string]> = [
  ['AWS access key id', 'AKIAIOSFODNN7PLANTED'.slice(0, 20)],
  ['AWS secret access key', 'aws_secret_access_key = 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'],
  ['GitHub token', `ghp_${'PLANTEDghTOKEN0123456789abcdefghijkl'.slice(0, 36)}`],
  ['GitHub fine-grained token', `github_pat_11PLANTED0${'x'.repeat(60)}`],
  ['GitLab token', 'glpat-PLANTEDgitlab12345678'],
  ['Slack bot token', 'xoxb-123456789012-PLANTED-abcdefghijkl'],
  ['Slack webhook', 'https://hooks.slack.com/services/T0PLANTED/B0PLANTED/abcdefghijklmnopqrstuvwx'],
  ['Google API key', `AIza${'PLANTEDgoogleKey_0123456789abcdefgh'.slice(0, 35)}`],
  ['Stripe key', 'sk_live_PLANTEDstripe0123456789'],
  ['npm token', `npm_${'PLANTEDnpm0123456789abcdefghijklmnop'.slice(0, 36)}`],
  ['JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJQTEFOVEVEIn0.PLANTEDsignature_abc123'],
  ['model key', 'sk-ant-api03-PLANTEDanthropic0123456789'],
  ['gateway key', 'sk-warden-PLANTEDgateway0123456789abcdef'],
  [
    'PEM private key',
    '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAPLANTEDrsa0123456789abcdefghijklmnopqrstuvwxyzABCD\nPLANTEDsecondLine0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH\n-----END RSA PRIVATE KEY-----',
  ],
  [
    'OpenSSH private key',
    '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQPLANTEDopenssh0123456789\n-----END OPENSSH PRIVATE KEY-----',
  ],
  ['PKCS8 private key', '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPLANTEDed25519key0123456789abcdefghij\n-----END PRIVATE KEY-----'],
];

/** Every planted secret, one per line: what an agent or a test run prints to leak them. */
export const PLANTED_TEXT = PLANTED.map(([, secret]) => secret).join('\n');
